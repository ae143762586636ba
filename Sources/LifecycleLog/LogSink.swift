import Foundation
import LifecycleLocks

/// Where log lines go: a buffer in memory that one writer thread empties into a file
/// descriptor every ``interval``, so that the thread that logs a line (a request's) makes no
/// system call for it. A warning or an error is written at once, with every line before it.
///
/// The buffer holds at most ``capacity`` bytes. When its reader cannot keep up (a pipe to a
/// log collector that has stalled), a line of info or debug that finds it full is dropped and
/// counted, and a warning line (`msg="log lines dropped" count=…`) says how many where they
/// went missing: the service's threads never wait for whoever reads the log. Warnings and
/// errors are never dropped; they wait for the write, as any write of a line used to.
///
/// What a sink holds is written by ``flush()``: the service's stop and the end of `main`
/// call it. A process killed outright loses the lines of the last ``interval`` at most.
public final class LogSink: Sendable {
    /// The process's standard error, which the service's lines go to.
    public static let standardError = LogSink(descriptor: STDERR_FILENO)

    /// How often the writer empties the buffer: a line is written within this.
    public static let defaultInterval = Duration.milliseconds(50)
    /// Bytes the buffer holds at most: two intervals' lines at some 100,000 requests a second.
    public static let defaultCapacity = 2 << 20

    /// The bytes the buffer holds at most before info and debug lines are dropped.
    public let capacity: Int
    /// How long a line waits for the writer at most.
    public let interval: Duration
    private let pending: LockedValue<Pending>
    /// Held while a chunk is written, from taking it to the end of the write, so chunks
    /// go out in the order they were taken.
    private let output: LockedValue<Output>

    /// Lines not yet written.
    private struct Pending {
        var bytes: [UInt8] = []
        /// Lines dropped since the last write, and the format of the last one.
        var dropped = 0
        var droppedFormat = LineLogger.Format.logfmt
        var isStopped = false
    }

    private struct Output {
        let descriptor: Int32
        /// The buffer the pending bytes are swapped for, kept with its capacity.
        var spare: [UInt8] = []
    }

    /// A sink writing to `descriptor` (which it does not close) at least every `interval`.
    public init(descriptor: Int32, capacity: Int = LogSink.defaultCapacity, interval: Duration = LogSink.defaultInterval) {
        self.capacity = capacity
        self.interval = interval
        var pending = Pending()
        pending.bytes.reserveCapacity(64 << 10)
        self.pending = LockedValue(pending)
        output = LockedValue(Output(descriptor: descriptor))
        let writer = Thread { [self] in run() }
        writer.name = "log writer"
        writer.start()
    }

    /// Adds one line: `write` adds its fields after the message. A warning or an error is
    /// written before this returns.
    func append(_ level: LineLogger.Level, _ message: String, format: LineLogger.Format, fields write: (inout LogLine) -> Void) {
        // Made outside the lock, which is then held only to copy the line in: threads that
        // log at once wait for a copy, not for each other's formatting.
        var line = LogLine(format: format, milliseconds: Timestamp.nowMilliseconds(), level: level, message: message)
        write(&line)
        line.end()
        let isUrgent = level >= .warning
        let added = line.withBytes { bytes in
            pending.withLock { pending in
                guard isUrgent || pending.bytes.count < capacity else {
                    pending.dropped += 1
                    pending.droppedFormat = format
                    return false
                }
                pending.bytes.append(contentsOf: bytes)
                return true
            }
        }
        if added, isUrgent { flush() }
    }

    /// Writes every line added so far, and a count of those dropped, before it returns.
    public func flush() {
        output.withLock { output in
            var chunk: [UInt8] = []
            swap(&chunk, &output.spare)
            let (dropped, format) = pending.withLock { pending in
                swap(&chunk, &pending.bytes)
                defer { pending.dropped = 0 }
                return (pending.dropped, pending.droppedFormat)
            }
            if dropped > 0 {
                var line = LogLine(format: format, milliseconds: Timestamp.nowMilliseconds(), level: .warning, message: "log lines dropped")
                line.field("count", dropped)
                line.end()
                line.withBytes { chunk.append(contentsOf: $0) }
            }
            Self.write(chunk, to: output.descriptor)
            chunk.removeAll(keepingCapacity: true)
            output.spare = chunk
        }
    }

    /// Writes what is pending and ends the writer thread (for a sink a test made; the
    /// standard error's lasts as long as the process).
    public func stop() {
        pending.withLock { $0.isStopped = true }
        flush()
    }

    private func run() {
        let nanoseconds = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
        var pause = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        while !pending.withLock({ $0.isStopped }) {
            nanosleep(&pause, nil)
            if pending.withLock({ !$0.bytes.isEmpty || $0.dropped > 0 }) { flush() }
        }
    }

    /// All of `bytes`, retrying on signals and partial writes; on any other failure the rest
    /// is lost (there is nowhere else to say so).
    private static func write(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else if written < 0, errno == EAGAIN {
                    var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, 100)
                } else {
                    return
                }
            }
        }
    }
}
