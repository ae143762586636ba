import Foundation
import LifecycleTestSupport
import LifecycleStore
import LifecycleHTTP
import LifecycleLocks
@testable import LifecycleService

/// Reads a subscription the way the server does, without a socket: `read(into:)` until it
/// answers `.wait` or `.wroteAll`, then nothing until its waker is called.
final class StreamReader {
    let subscription: Subscription
    private let woken: DispatchSemaphore
    private var buffer: [UInt8]
    private var unparsed: [UInt8] = []
    private(set) var events: [StreamEvent] = []
    private(set) var hasEnded = false
    /// Calls to `read(into:)` that answered `.wait` or `.wroteAll`.
    private(set) var waits = 0

    /// `woken` is signalled by the subscription's waker (several readers may share one).
    init(_ subscription: Subscription, bufferSize: Int = 16 * 1024, woken: DispatchSemaphore = DispatchSemaphore(value: 0)) {
        self.subscription = subscription
        self.woken = woken
        buffer = [UInt8](repeating: 0, count: bufferSize)
        subscription.start(waker: StreamWaker { woken.signal() })
    }

    deinit {
        if !hasEnded { subscription.finish() }
    }

    var records: [StreamEvent] { events.filter(\.isRecord) }
    var lastRecordID: Int64? { records.last?.id }

    /// Reads until the subscription waits or ends; returns whether it wrote anything.
    @discardableResult
    func readAvailable() -> Bool {
        read(once: false)
    }

    /// One `read(into:)`, as when the connection can take one buffer more.
    func readOnce() {
        _ = read(once: true)
    }

    private func read(once: Bool) -> Bool {
        var wrote = false
        while !hasEnded {
            let result = buffer.withUnsafeMutableBytes { subscription.read(into: $0) }
            switch result {
            case .wrote(let count), .wroteAll(let count):
                precondition(count > 0 && count <= buffer.count)
                unparsed += buffer[..<count]
                events += parseEvents(&unparsed)
                wrote = true
                if case .wroteAll = result {
                    waits += 1
                    return true
                }
                if once { return true }
            case .wait:
                waits += 1
                return wrote
            case .end:
                hasEnded = true
                subscription.finish()
            }
            if once { return wrote }
        }
        return wrote
    }

    /// Reads, waiting for the waker between reads, until `done` holds or the stream ends.
    func read(until done: (StreamReader) -> Bool, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            readAvailable()
            if done(self) || hasEnded { return }
            guard Date() < deadline else { throw HTTPClientError(description: "stream not done after \(timeout) s; events: \(events.suffix(5))") }
            _ = woken.wait(timeout: .now() + 0.5)
        }
    }

    /// Waits until the subscription's waker is called (or `timeout` seconds pass).
    func waitForWake(timeout: Double) {
        _ = woken.wait(timeout: .now() + timeout)
    }

    /// Reads until a record with this sequence number (or a later one) has arrived.
    func read(through sequence: Int64, timeout: Double = 30) throws {
        try read(until: { ($0.lastRecordID ?? 0) >= sequence }, timeout: timeout)
    }
}

/// A client that reconnects as EventSource does: after an overflow, it subscribes again after
/// the last event id it was given. Its records are those of all its connections.
final class ResumingReader {
    let hub: StreamHub
    private var reader: StreamReader
    private(set) var records: [StreamEvent] = []
    private(set) var reconnects = 0
    private var lastEventID: Int64

    private let bufferSize: Int

    init(_ hub: StreamHub, after: Int64, bufferSize: Int = 16 * 1024) throws {
        self.hub = hub
        self.bufferSize = bufferSize
        lastEventID = after
        reader = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: after), bufferSize: bufferSize)
    }

    /// One `read(into:)`.
    func readOnce() throws {
        try readAvailable(once: true)
    }

    func readAvailable(once: Bool = false) throws {
        while true {
            let seen = reader.events.count
            if once { reader.readOnce() } else { reader.readAvailable() }
            for event in reader.events[seen...] {
                if let id = event.id { lastEventID = id }
                if event.isRecord { records.append(event) }
                guard event.type != "gap", event.type != "reset" else { throw HTTPClientError(description: "unexpected \(event)") }
            }
            guard reader.hasEnded else { return }
            reconnects += 1
            reader = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: lastEventID), bufferSize: bufferSize)
        }
    }

    func read(through sequence: Int64, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while (records.last?.id ?? 0) < sequence {
            try readAvailable()
            guard Date() < deadline else { throw HTTPClientError(description: "not at \(sequence) after \(timeout) s") }
            if (records.last?.id ?? 0) < sequence { reader.waitForWake(timeout: 0.5) }
        }
    }
}

/// What a committed write answered, decoded.
func sequence(of response: HTTPResponse) -> Int64? {
    if let sequence = response.json["sequence"] as? Int { return Int64(sequence) }
    if let record = response.json["record"] as? [String: Any], let sequence = record["sequence"] as? Int { return Int64(sequence) }
    return nil
}

/// A fixed linear congruential generator: the same "random" numbers on every run.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state ^ (state >> 33)
    }
}

/// The events an iOS app cycles through once launched: foreground, background, foreground.
let appCycle = ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]
