import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay to a service on loopback that passes requests on and throws every answer
/// away: the service applies a write whose answer its client never gets, as when a
/// connection is lost after the request went out. Closed when dropped.
final class AnswerSwallowingRelay {
    let port: UInt16
    private let listener: LoopbackListener

    init(to target: UInt16) throws {
        listener = try LoopbackListener()
        port = listener.port
        let listening = listener.fd
        Thread.detachNewThread {
            while true {
                let client = accept(listening, nil, nil)
                guard client >= 0 else { return }  // shut down
                let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = target.bigEndian
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                guard connected == 0 else { close(upstream); close(client); continue }
                // Requests go on; when the client is gone, so is the upstream connection.
                Thread.detachNewThread {
                    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                    while true {
                        let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress!, $0.count, 0) }
                        guard n > 0 else { break }
                        _ = buffer.withUnsafeBytes { send(upstream, $0.baseAddress!, n, Int32(MSG_NOSIGNAL)) }
                    }
                    shutdown(upstream, Int32(SHUT_RDWR))
                    close(client)
                }
                // Answers are read and dropped.
                Thread.detachNewThread {
                    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                    while buffer.withUnsafeMutableBytes({ recv(upstream, $0.baseAddress!, $0.count, 0) }) > 0 {}
                    close(upstream)
                }
            }
        }
    }

    deinit { shutdown(listener.fd, Int32(SHUT_RDWR)) }
}

@Suite("the command line under kill -9", .serialized)
struct CommandLineCrashTests {
    /// Events each valid where the one before it leaves an ios-app instance, from foreground.
    static let cycle = ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]

    @Test("post --queue and flush killed with kill -9 at seeded random points, 20 runs, then run again: every queued item stored exactly once, in order")
    func killNine() throws {
        let data = TemporaryDirectory("lifecycled-cli-kill")
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data")
        let c = try WireClient(port: server.port)
        let relay = try AnswerSwallowingRelay(to: server.port)
        let nobody = freePort()
        let started = Date()
        var killed = (posts: 0, flushes: 0)
        var replayed = 0

        for run in 0..<20 {
            var random = SeededGenerator(state: UInt64(run))
            let id = "kill-\(run)"
            let queue = data.path + "/queue-\(run)"
            try c.makeInstance(id, events: coldStart)
            /// Tags (`ranHooks`) in the order posted, and whether the post finished (else it was killed).
            var posted: [(tag: String, finished: Bool)] = []

            func start(_ arguments: [String], port: UInt16) throws -> LifecycledProcess {
                try LifecycledProcess(arguments: arguments, environment: ["LIFECYCLED_SERVER": "http://127.0.0.1:\(port)"])
            }
            /// Runs `process`, killed after a random 0-60 ms when `kill`; whether it finished by itself.
            func finish(_ process: LifecycledProcess, kill: Bool, _ what: String) -> Bool {
                if kill {
                    usleep(UInt32.random(in: 0...60_000, using: &random))
                    process.signal(SIGKILL)
                }
                let result = process.finish()
                if result.status == SIGKILL, kill { return false }
                #expect([0, 3].contains(result.status), "run \(run): \(what) exited \(result.status): \(result.stdout) \(result.stderr)")
                return true
            }
            func post(_ port: UInt16, kill: Bool) throws {
                let tag = "run\(run)-item\(posted.count)"
                let process = try start(["post", "--queue", queue, "--ran", tag, id, Self.cycle[posted.count % 4]], port: port)
                let finished = finish(process, kill: kill, "post \(tag)")
                if !finished { killed.posts += 1 }
                posted.append((tag, finished))
            }
            func stored() throws -> [String] {
                try c.fullHistory(id).filter { ($0["version"] as? Int ?? 0) > coldStart.count }.compactMap { ($0["ranHooks"] as? [String])?.first }
            }

            // Queued while the service cannot be reached, some posts killed on the way (the first never, so there is something to send).
            for index in 0..<4 { try post(nobody, kill: index > 0 && Bool.random(using: &random)) }

            // A flush whose batch the service applies and whose answer is lost, killed then:
            // only the items' keys keep the flushes after it from storing them again.
            let blind = try start(["flush", "--queue", queue], port: relay.port)
            let queuedForSure = posted.filter(\.finished).map(\.tag)
            let applied = try eventually(within: 10) { try Set(stored()).isSuperset(of: queuedForSure) }
            #expect(applied, "run \(run): the relayed batch was applied")
            blind.signal(SIGKILL)
            #expect(blind.finish().status == SIGKILL, "run \(run): the blind flush was still waiting for its answer")
            killed.flushes += 1
            let appliedUnanswered = try stored().count
            replayed += appliedUnanswered

            // A flush killed at a random point, then posts to the live service, some killed too.
            if !finish(try start(["flush", "--queue", queue], port: server.port), kill: true, "flush") { killed.flushes += 1 }
            for _ in 0..<2 { try post(server.port, kill: Bool.random(using: &random)) }

            // Run again to the end: the queue empties, and each item is in the history once, in the order posted.
            let last = try start(["flush", "--queue", queue], port: server.port).finish()
            #expect(last.status == 0, "run \(run): \(last.stdout) \(last.stderr)")
            #expect(try start(["flush", "--queue", queue], port: server.port).finish().stdout == "0\n", "run \(run): the queue is empty")
            let tags = try stored()
            #expect(Set(tags).count == tags.count, "run \(run): an item stored twice: \(tags)")
            #expect(tags == posted.map(\.tag).filter(tags.contains), "run \(run): stored out of order, or not what was posted: \(tags)")
            for item in posted where item.finished {
                #expect(tags.contains(item.tag), "run \(run): \(item.tag) was queued (its post finished) but is not stored")
            }
            #expect(tags.count >= appliedUnanswered, "run \(run): the applied batch is kept")
        }
        let took = Date().timeIntervalSince(started)
        print("kill -9: 20 runs in \(String(format: "%.1f", took)) s; \(killed.posts) posts and \(killed.flushes) flushes killed; \(replayed) items applied with their answer lost, replayed by key")
        #expect(killed.posts > 0 && replayed >= 20, "the kills landed: \(killed)")
        #expect(took < 60, "the 20 runs took \(took) s")
    }
}
