import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleStore

@Suite("crash safety", .serialized)
struct CrashTests {
    /// A cycle of events each valid where it arrives, starting from foreground.
    static let cycle = ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]

    @Test("kill -9 under 8 writers loses no acknowledged record", arguments: ["normal", "full"])
    func killNine(sync: String) throws {
        let data = TemporaryDirectory("lifecycled-crash")
        let writers = 8
        var server = try LifecycledProcess.serving(dataDirectory: data.path, extra: ["--sync", sync])
        let setup = try WireClient(port: server.port)
        for writer in 0..<writers { try setup.makeInstance("crash-\(writer)", events: coldStart) }

        let acknowledged = LockedValue<[Acknowledged]>([])
        let group = startClients(writers, port: server.port) { writer, c in
            var i = 0
            while true {
                let id = "crash-\(writer)"
                // Every fifth request is an action, so two kinds of record are in flight.
                let response: HTTPResponse?
                if i % 5 == 4 {
                    response = try? c.request("POST", "/v1/instances/\(id)/actions", json: #"{"action": "openURL", "url": "https://example.com/\#(i)"}"#)
                } else {
                    response = try? c.event(id, #"{"event": "\#(Self.cycle[(i - i / 5) % 4])"}"#)
                }
                guard let response else { return }  // the server is gone
                if (200..<300).contains(response.status), let version = response.json["version"] as? Int, let sequence = response.json["sequence"] as? Int {
                    acknowledged.withLock { $0.append(Acknowledged(instance: id, version: version, sequence: sequence)) }
                } else {
                    Issue.record("writer \(writer) got \(response.status): \(response.text)")
                    return
                }
                i += 1
            }
        }
        // Kill the server in the middle of the writers' work, once they have 200 records in.
        #expect(eventually(within: 60) { acknowledged.withLock { $0.count } > 200 }, "the writers were busy when the server died")
        server.signal(SIGKILL)
        group.wait()
        let run = server.finish()
        #expect(run.status == SIGKILL || run.status == 9, "killed, not exited")
        let acks = acknowledged.withLock { $0 }

        server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        var allSequences: [Int] = []
        for writer in 0..<writers {
            let id = "crash-\(writer)"
            let history = try c.fullHistory(id)
            let versions = history.compactMap { $0["version"] as? Int }
            #expect(versions == Array(1...max(1, versions.count)), "versions of \(id) are contiguous")
            let instance = try c.request("GET", "/v1/instances/\(id)").json
            #expect(instance["version"] as? Int == versions.last, "restored version matches the last record of \(id)")
            let stored = Dictionary(uniqueKeysWithValues: history.map { ($0["sequence"] as! Int, $0["version"] as! Int) })
            for ack in acks where ack.instance == id {
                #expect(stored[ack.sequence] == ack.version, "acknowledged record \(ack.sequence) of \(id) survived")
            }
            allSequences += stored.keys
        }
        #expect(Set(allSequences).count == allSequences.count, "no record is duplicated")
        server.signal(SIGTERM)
        #expect(server.finish().status == 0)

        let store = try SQLiteStore(directory: data.path)
        #expect(try store.integrityCheck() == "ok")
    }
}
