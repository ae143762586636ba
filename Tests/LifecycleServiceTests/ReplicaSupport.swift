import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `lifecycled` replicas on one PostgreSQL database: each its own process, data folder and port.
final class Replicas {
    let databaseURL: String
    private var processes: [LifecycledProcess?]
    private let folders: [TemporaryDirectory]
    let ports: [UInt16]

    /// Starts `count` replicas one after the other, each answering `/healthz` before the next starts.
    /// `extra`: more flags for every replica; `perReplica`: for each one by index; `listenURL`: `--database-listen-url`.
    init(_ count: Int, databaseURL: String, listenURL: String? = nil, extra: [String] = [], perReplica: [[String]] = []) throws {
        self.databaseURL = databaseURL
        folders = (0..<count).map { _ in TemporaryDirectory("lifecycled-replica") }
        var processes: [LifecycledProcess?] = []
        for (index, folder) in folders.enumerated() {
            let own = index < perReplica.count ? perReplica[index] : []
            let flags = ["--database-url", databaseURL, "--log-level", "info"] + (listenURL.map { ["--database-listen-url", $0] } ?? []) + extra + own
            processes.append(try LifecycledProcess.serving(dataDirectory: folder.path, extra: flags))
        }
        self.processes = processes
        ports = processes.map { $0!.port }
    }

    deinit { stopAll() }

    var count: Int { ports.count }

    /// The replicas still running, by index.
    var alive: [Int] { processes.indices.filter { processes[$0]?.process.isRunning == true } }

    func process(_ index: Int) -> LifecycledProcess? { processes[index] }

    /// `kill -9`: the replica dies in the middle of whatever it does. Returns its exit status and standard error.
    @discardableResult
    func kill(_ index: Int) -> (status: Int32, stderr: String) {
        guard let process = processes[index] else { return (0, "") }
        process.signal(SIGKILL)
        let run = process.finish()
        processes[index] = nil
        return (run.status, run.stderr)
    }

    /// Stops every replica still running (SIGTERM) and records one that does not exit 0.
    func stopAll() {
        for index in processes.indices {
            guard let process = processes[index] else { continue }
            process.signal(SIGTERM)
            let run = process.finish()
            if run.status != 0 { Issue.record("replica \(index) exited \(run.status): \(run.stderr.suffix(2000))") }
            processes[index] = nil
        }
    }

    /// What a replica logged so far (for a failure's message).
    func log(_ index: Int) -> String { processes[index]?.standardErrorSoFar ?? "" }
}

/// A client of `/v1/stream` on one replica that, when its connection is cut (the replica
/// died), resumes on the replica the test names with `Last-Event-ID`, as an EventSource
/// behind a load balancer would. A thread of its own reads all the time, so the server never
/// waits on it.
final class ReplicaSubscriber: Sendable {
    struct Connection: Sendable, Equatable {
        var port: UInt16
        /// The `Last-Event-ID` it sent.
        var lastEventID: Int64
    }

    private struct State: Sendable {
        var events: [StreamEvent] = []
        var connections: [Connection] = []
        /// Set while the connection is cut: where to resume.
        var resumePort: UInt16?
        var isCut = false
        var isStopping = false
        var failure: String?
    }

    private let state = LockedValue(State())
    private let finished = DispatchSemaphore(value: 0)

    /// Connects to `port` (from after `lastEventID`) and returns once the stream's head has
    /// arrived: records committed from then on reach it.
    init(port: UInt16, after lastEventID: Int64 = 0) throws {
        let connected = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            run(port: port, after: lastEventID, connected: connected)
            finished.signal()
        }
        guard connected.wait(timeout: .now() + 20) == .success else { throw HTTPClientError(description: "no stream from \(port) within 20 s") }
        if let failure = state.withLock({ $0.failure }) { throw HTTPClientError(description: failure) }
    }

    /// Every block with data received, in order, over all connections.
    var events: [StreamEvent] { state.withLock { $0.events } }
    var records: [StreamEvent] { events.filter(\.isRecord) }
    var lastRecordID: Int64 { state.withLock { $0.events.last(where: \.isRecord)?.id ?? 0 } }
    var connections: [Connection] { state.withLock { $0.connections } }
    var isCut: Bool { state.withLock { $0.isCut } }
    /// Why it stopped reading, if it did on its own.
    var failure: String? { state.withLock { $0.failure } }

    /// Resumes on `port` after the connection was cut.
    func resume(on port: UInt16) { state.withLock { $0.resumePort = port } }

    /// Waits (at most `seconds`) until a record with this sequence number or a later one has arrived.
    func waitForRecord(_ sequence: Int64, within seconds: Double = 60) -> Bool {
        eventually(within: seconds) { lastRecordID >= sequence || failure != nil }
    }

    /// Stops reading and closes the connection.
    func stop() {
        state.withLock { $0.isStopping = true }
        _ = finished.wait(timeout: .now() + 10)
    }

    private func run(port first: UInt16, after: Int64, connected: DispatchSemaphore) {
        var port = first
        var lastEventID = after
        var isFirst = true
        while true {
            let client: EventStream
            do {
                client = try EventStream(port: port, path: "/v1/stream", headers: [("Last-Event-ID", String(lastEventID))])
                guard client.status == 200 else { throw HTTPClientError(description: "GET /v1/stream on \(port) answered \(client.status)") }
            } catch {
                state.withLock { $0.failure = "cannot subscribe on \(port): \(error)" }
                if isFirst { connected.signal() }
                return
            }
            state.withLock {
                $0.connections.append(Connection(port: port, lastEventID: lastEventID))
                $0.isCut = false
                $0.resumePort = nil
            }
            if isFirst { connected.signal() }
            isFirst = false
            while !state.withLock({ $0.isStopping }) {
                guard let event = client.next(timeout: 0.2) else {
                    if client.wasCut || client.hasEnded { break }
                    continue
                }
                state.withLock { $0.events.append(event) }
                if event.isRecord, let id = event.id { lastEventID = id }
            }
            if state.withLock({ $0.isStopping }) { return }
            // Cut: wait for the test to say where to go on (as a load balancer would pick a replica that lives).
            state.withLock { $0.isCut = true }
            var next: UInt16?
            while next == nil {
                if state.withLock({ $0.isStopping }) { return }
                next = state.withLock { $0.resumePort }
                if next == nil { usleep(10_000) }
            }
            port = next!
        }
    }
}

/// The answer a write finally got (after as many retries as it took), with what identifies it.
struct WriteAnswer: Sendable {
    var key: String
    var instance: String
    var status: Int
    var body: [UInt8]
    var sequence: Int
    var version: Int
    /// The replica that gave this answer.
    var replica: Int
    /// Attempts it took (1: answered at the first).
    var attempts: Int

    /// The committed record the answer carries: the body itself (200) or its `record` (409 unexpected).
    var record: [String: Any] {
        let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
        return json["record"] as? [String: Any] ?? json
    }
}

/// A write answered with a committed record: 200, or 409 for an event unexpected in the
/// instance's state (recorded and counted all the same). Its record's sequence and version.
func committedRecord(_ response: HTTPResponse) -> (sequence: Int, version: Int)? {
    guard response.status == 200 || response.status == 409 else { return nil }
    let json = response.json
    let record = response.status == 409 ? json["record"] as? [String: Any] : json
    guard let record, let sequence = record["sequence"] as? Int, let version = record["version"] as? Int else { return nil }
    return (sequence, version)
}

/// Writers that post with an `Idempotency-Key` each, spread over replicas; a write whose
/// replica fails (the connection drops or cannot be made) is sent again, with the same key,
/// to the next replica, until it is answered.
final class ReplicaWriters: Sendable {
    private let answers = LockedValue<[WriteAnswer]>([])
    private let problems = LockedValue<[String]>([])
    /// 5xx answers seen (each retried).
    private let unavailable = LockedValue<[String]>([])
    private let group = DispatchGroup()

    /// The events cycled through, and every fourth write an `openURL` action whose URL names
    /// the write's key: each is valid or recorded as unexpected in any state the cycle reaches.
    static func body(writer: Int, index: Int, key: String) -> (path: String, json: String) {
        if index % 4 == 3 { return ("actions", #"{"action": "openURL", "url": "https://example.com/\#(key)"}"#) }
        return ("events", #"{"event": "\#(appCycle[(index + writer) % appCycle.count])"}"#)
    }

    /// Starts `count` writer threads; writer `w` begins on replica `w % ports.count` and posts
    /// `writes` times to `instance(w)`.
    init(_ count: Int, ports: [UInt16], writes: Int, instance: @escaping @Sendable (Int) -> String) {
        for writer in 0..<count {
            group.enter()
            Thread.detachNewThread { [self] in
                defer { group.leave() }
                run(writer: writer, ports: ports, writes: writes, instance: instance(writer))
            }
        }
    }

    var acknowledged: [WriteAnswer] { answers.withLock { $0 } }
    var failures: [String] { problems.withLock { $0 } }
    var unavailableAnswers: [String] { unavailable.withLock { $0 } }

    /// Waits for every writer to finish (at most `seconds`).
    func wait(within seconds: Double = 300) -> Bool { group.wait(timeout: .now() + seconds) == .success }

    private func run(writer: Int, ports: [UInt16], writes: Int, instance: String) {
        var replica = writer % ports.count
        var connection: WireClient?
        let deadline = Date().addingTimeInterval(240)
        for index in 0..<writes {
            let key = "w\(writer)-\(index)"
            let (path, json) = Self.body(writer: writer, index: index, key: key)
            var attempts = 0
            while true {
                attempts += 1
                guard Date() < deadline else {
                    problems.withLock { $0.append("\(key): no answer before the deadline after \(attempts) attempts") }
                    return
                }
                let response: HTTPResponse
                do {
                    if connection == nil { connection = try WireClient(port: ports[replica]) }
                    response = try connection!.request("POST", "/v1/instances/\(instance)/\(path)", json: json, headers: [("Idempotency-Key", key)])
                } catch {
                    // The replica is gone (or going): the same request, with the same key, to the next one.
                    connection = nil
                    replica = (replica + 1) % ports.count
                    continue
                }
                if response.status >= 500 {
                    unavailable.withLock { $0.append("\(key) on replica \(replica): \(response.status) \(response.text)") }
                    connection = nil
                    replica = (replica + 1) % ports.count
                    usleep(20_000)
                    continue
                }
                guard let committed = committedRecord(response) else {
                    problems.withLock { $0.append("\(key) on replica \(replica): \(response.status) \(response.text)") }
                    break
                }
                answers.withLock {
                    $0.append(WriteAnswer(
                        key: key, instance: instance, status: response.status, body: response.body, sequence: committed.sequence,
                        version: committed.version, replica: replica, attempts: attempts
                    ))
                }
                break
            }
        }
    }
}
