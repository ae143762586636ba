import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleLog

/// The log's buffer (``LogSink``): lines wait in memory for one writer, off the threads that
/// log them, and come out in order, at once for a warning, within 100 ms otherwise.
@Suite("log buffer")
struct LogBufferTests {
    /// A pipe whose read end never blocks, and what has come out of it.
    final class LogPipe {
        /// F_SETPIPE_SZ (Linux), which the Glibc module does not export.
        static let setSize: Int32 = 1031
        let readEnd: Int32
        let writeEnd: Int32
        private(set) var received: [UInt8] = []

        init() {
            var ends: [Int32] = [0, 0]
            precondition(pipe(&ends) == 0)
            readEnd = ends[0]
            writeEnd = ends[1]
            _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
        }

        deinit {
            close(readEnd)
            close(writeEnd)
        }

        /// Reads what the pipe holds now; returns the lines received so far.
        @discardableResult
        func drain() -> [String] {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(readEnd, &chunk, chunk.count)
                guard count > 0 else { break }
                received += chunk[..<count]
            }
            return lines
        }

        var lines: [String] { String(decoding: received, as: UTF8.self).split(separator: "\n").map(String.init) }
    }

    @Test("an info line waits for the writer; a warning is written at once, after every line before it")
    func warningsAreWrittenAtOnce() {
        let output = LogPipe()
        let sink = LogSink(descriptor: output.writeEnd, interval: .seconds(60))
        defer { sink.stop() }
        let logger = LineLogger(sink: sink)
        logger.info("first")
        logger.info("second", ["n": "2"])
        #expect(output.drain().isEmpty, "an info line is not written by the thread that logs it")
        logger.warning("look", ["at": "this"])
        let lines = output.drain()
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.hasSuffix(" level=info msg=first") == true, "\(lines)")
        #expect(lines.dropFirst().first?.hasSuffix(" level=info msg=second n=2") == true, "\(lines)")
        #expect(lines.last?.hasSuffix(" level=warning msg=look at=this") == true, "\(lines)")
        logger.error("failed")
        #expect(output.drain().last?.hasSuffix(" level=error msg=failed") == true)
    }

    @Test("a ServiceEvent (what the store and the core report) is one line at its level, its fields in order, below the logger's level none")
    func eventsAreLoggedAsLines() {
        let output = LogPipe()
        let sink = LogSink(descriptor: output.writeEnd, interval: .seconds(60))
        defer { sink.stop() }
        let logger = LineLogger(level: .warning, sink: sink)
        logger.log(ServiceEvent(.info, "database checked", ["database": "a"]))
        logger.log(ServiceEvent(.warning, "PostgreSQL connection lost", fields: [("connection", "read"), ("error", "gone away")]))
        logger.log(ServiceEvent(.error, "write failed", ["id": "i1", "write": "event"]))
        let lines = output.drain()
        #expect(lines.count == 2, "the info event is below the logger's level: \(lines)")
        #expect(lines.first?.hasSuffix(#" level=warning msg="PostgreSQL connection lost" connection=read error="gone away""#) == true, "\(lines)")
        #expect(lines.last?.hasSuffix(" level=error msg=\"write failed\" id=i1 write=event") == true, "\(lines)")
    }

    // That it takes about 50 ms (the writer's interval) is a figure, which tests do not assert
    // (a loaded machine stretches it); that the line comes by itself, with no stop, flush or
    // warning behind it, is what this checks.
    @Test("without a stop or a warning, each line is written by the writer thread on its own")
    func linesAreWrittenWithinTheInterval() {
        let output = LogPipe()
        let sink = LogSink(descriptor: output.writeEnd)
        defer { sink.stop() }
        let logger = LineLogger(sink: sink)
        for round in 0..<5 {
            logger.info("round", ["n": String(round)])
            #expect(eventually { output.drain().count > round }, "round \(round) was never written")
            #expect(output.lines.count == round + 1 && output.lines.last?.hasSuffix("msg=round n=\(round)") == true, "\(output.lines)")
        }
    }

    @Test("flush writes every line at once, each thread's lines in the order it logged them")
    func orderIsKept() {
        let output = LogPipe()
        // Room in the pipe for every line, so that no write waits for this test to read.
        _ = fcntl(output.writeEnd, LogPipe.setSize, 1 << 20)
        let sink = LogSink(descriptor: output.writeEnd, interval: .milliseconds(1))
        defer { sink.stop() }
        let logger = LineLogger(format: .json, sink: sink)
        let threads = 4, perThread = 500
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for n in 0..<perThread { logger.log(.info, "line") { $0.field("thread", thread); $0.field("n", n) } }
        }
        sink.flush()
        var next = [Int](repeating: 0, count: threads)
        var outOfOrder = 0
        for line in output.drain() {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
                  let thread = object["thread"].flatMap({ Int($0) }), let n = object["n"].flatMap({ Int($0) }) else {
                Issue.record("not a line of the test: \(line)")
                continue
            }
            if n != next[thread] { outOfOrder += 1 }
            next[thread] = n + 1
        }
        #expect(next == [Int](repeating: perThread, count: threads), "every line written once flush returns")
        #expect(outOfOrder == 0)
    }

    @Test("when the log's reader stalls, info lines are dropped without holding the thread, and a later line counts them")
    func aStalledReaderDropsAndCounts() throws {
        let output = LogPipe()
        // A small pipe and buffer: the writer blocks once both are full.
        _ = fcntl(output.writeEnd, LogPipe.setSize, 4096)
        let sink = LogSink(descriptor: output.writeEnd, capacity: 8192, interval: .milliseconds(1))
        let logger = LineLogger(sink: sink)
        let total = 5000
        let started = DispatchTime.now().uptimeNanoseconds
        for n in 0..<total { logger.log(.info, "filler") { $0.field("n", n) } }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(seconds < 5, "logging waited for the reader: \(seconds) s")
        // The reader comes back: everything still held, and the count, come out.
        let done = DispatchSemaphore(value: 0)
        Thread {
            sink.stop()
            done.signal()
        }.start()
        while done.wait(timeout: .now() + .milliseconds(1)) == .timedOut { output.drain() }
        let lines = output.drain()
        let written = lines.filter { $0.contains("msg=filler") }
        let notes = lines.filter { $0.contains("level=warning msg=\"log lines dropped\"") }
        let dropped = notes.compactMap { $0.split(separator: " ").first { $0.hasPrefix("count=") }.flatMap { Int($0.dropFirst(6)) } }.reduce(0, +)
        #expect(dropped > 0 && !notes.isEmpty, "\(lines.suffix(3))")
        #expect(written.count + dropped == total, "written \(written.count), dropped \(dropped)")
        let numbers = written.compactMap { $0.split(separator: "=").last.flatMap { Int($0) } }
        #expect(numbers == numbers.sorted(), "the lines kept are in order")
    }

    @Test("a line's time, reckoned without gmtime, is gmtime's: leap days, centuries, before 1970")
    func timesAgreeWithTheCLibrary() {
        func reference(_ milliseconds: Int64) -> String {
            var seconds = time_t(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
            var parts = tm()
            gmtime_r(&seconds, &parts)
            let fraction = milliseconds - Int64(seconds) * 1000
            return String(format: "%d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, Int32(fraction))
        }
        var generator = SystemRandomNumberGenerator()
        // 2000-02-29, 2100-03-01, 1900-02-28, 1969-12-31T23:59:59.999, the epoch, and random times over ±300 years.
        var times: [Int64] = [951_782_400_000, 4_107_542_400_000, -2_203_977_600_000, -1, 0, 1]
        for _ in 0..<20_000 { times.append(Int64.random(in: -9_000_000_000_000...9_000_000_000_000, using: &generator)) }
        for time in times {
            let written = String(decoding: LogLine.written { Timestamp.write(time, into: &$0) }, as: UTF8.self)
            guard written == reference(time) else {
                Issue.record("\(time): \(written), gmtime says \(reference(time))")
                return
            }
        }
    }

    @Test("on the service: a request's line is out within 100 ms, so a kill -9 loses none older")
    func killLosesOnlyTheLastLines() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let answered = try WireClient(port: server.port).request("GET", "/healthz", headers: [("X-Request-ID", "before-kill")])
        let sent = DispatchTime.now().uptimeNanoseconds
        #expect(answered.status == 200)
        let line = server.waitForLogLine(containing: ["request_id=before-kill"])
        let millis = Double(DispatchTime.now().uptimeNanoseconds - sent) / 1e6
        // waitForLogLine looks every 10 ms.
        #expect(line != nil && millis <= 110, "the line came after \(millis) ms")
        server.signal(SIGKILL)
        let run = server.finish()
        #expect(run.status == SIGKILL || run.status == 9)
        #expect(run.stderr.contains("request_id=before-kill"))
    }

    @Test("on the service: a clean stop writes every line still held, the stop's last")
    func stopWritesEverything() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let connection = try WireClient(port: server.port)
        for n in 0..<20 { _ = try connection.request("GET", "/healthz", headers: [("X-Request-ID", "held-\(n)")]) }
        server.signal(SIGTERM)
        let run = server.finish()
        #expect(run.status == 0)
        let lines = run.stderr.split(separator: "\n")
        for n in 0..<20 { #expect(lines.contains { $0.contains("request_id=held-\(n) ") }, "held-\(n)") }
        #expect(lines.last?.contains("msg=\"lifecycled stopped\"") == true, "\(lines.suffix(3))")
    }
}
