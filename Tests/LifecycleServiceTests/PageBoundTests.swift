import Foundation
import LifecycleTestSupport
import LifecycleStore
import Testing
@testable import LifecycleService

/// Posts `count` `openURL` actions to `id`, each with a url of `urlBytes` bytes, and returns
/// the sequence numbers answered. Buffered, each record repeats the url it replaced.
func postLargeActions(_ c: some APIClient, _ id: String, count: Int, urlBytes: Int) throws -> [Int64] {
    let url = "https://example.com/" + String(repeating: "u", count: urlBytes - 20)
    return try (0..<count).map { _ in
        let response = try c.request("POST", "/v1/instances/\(id)/actions", json: #"{"action": "openURL", "url": "\#(url)"}"#)
        guard response.status == 200, let sequence = response.json["sequence"] as? Int else {
            throw HTTPClientError(description: "action refused: \(response.status) \(response.text.prefix(300))")
        }
        return Int64(sequence)
    }
}

@Suite("pages bounded in bytes")
struct PageBoundTests {
    @Test("--page-bytes: 4 MiB by default, from the flag or LIFECYCLED_PAGE_BYTES, at least 64 KiB, in --help; the hub and history get it")
    func pageBytesOption() throws {
        #expect(try Configuration.parse(arguments: [], environment: [:]).pageBytes == 4_194_304)
        #expect(try Configuration.parse(arguments: [], environment: ["LIFECYCLED_PAGE_BYTES": "65536"]).pageBytes == 65536)
        let given = try Configuration.parse(arguments: ["--page-bytes=1048576"], environment: ["LIFECYCLED_PAGE_BYTES": "65536"])
        #expect(given.pageBytes == 1_048_576 && given.streamSettings.pageBytes == 1_048_576)
        #expect(throws: Configuration.ParseError.badValue("--page-bytes", "65535")) { try Configuration.parse(arguments: ["--page-bytes", "65535"], environment: [:]) }
        #expect(Configuration.usage.contains("--page-bytes BYTES") && Configuration.usage.contains("LIFECYCLED_PAGE_BYTES"))
    }

    @Test("a history page of large records stops at --page-bytes (4 MiB) and says where to continue; following it gets every record once, in order")
    func historyPageStopsAtItsBytes() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("heavy")
        // 300 records of about 16 KiB: about 4.8 MiB, more than one page holds.
        let posted = try postLargeActions(c, "heavy", count: 300, urlBytes: 8192)

        let first = try c.request("GET", "/v1/instances/heavy/history?limit=1000")
        #expect(first.status == 200)
        let items = first.json["items"] as? [[String: Any]] ?? []
        #expect(first.body.count <= PageLimit.defaultBytes + 1024, "the page holds at most 4 MiB of records, with its envelope")
        #expect(items.count > 200 && items.count < 300, "it ends early, at its bytes (\(items.count) records)")
        #expect(first.json["nextAfter"] as? Int == items.last?["sequence"] as? Int, "and says where to continue")

        let all = try c.fullHistory("heavy").compactMap { $0["sequence"] as? Int }.map(Int64.init)
        #expect(all == posted, "every record once, in order")
    }

    @Test("a stream's replay from the store reads pages of at most --page-bytes, and still sends every record once, in order")
    func replayStepsAreBoundedInBytes() throws {
        let server = try TestServer {
            // The ring holds the larger of these: small, so that the replay reads the store.
            $0.streamRing = 65536
            $0.streamBuffer = 65536
            $0.pageBytes = 65536
        }
        let c = try server.connect()
        let created = try c.makeInstance("heavy")
        #expect(created.status == 201)
        // 40 records of about 8 KiB: about 330 KiB, five pages of 64 KiB at least.
        let posted = try postLargeActions(c, "heavy", count: 40, urlBytes: 4000)
        let hub = server.service!.hub
        let pages = hub.replayPagesRead

        let reader = StreamReader(try hub.subscribe(filter: RecordFilter(instances: ["heavy"]), lastEventID: 0), bufferSize: 4096)
        let deadline = Date().addingTimeInterval(30)
        while (reader.lastRecordID ?? 0) < posted.last!, Date() < deadline { reader.readAvailable() }
        #expect(reader.records.map { $0.id! }.dropFirst() == posted[...], "every record once, in order, after the creation record")
        // The ring holds 64 KiB at most: the store served the rest, 64 KiB a page at most.
        let fromStore = reader.records.reduce(0) { $0 + ($1.data?.utf8.count ?? 0) } - 65536
        let read = hub.replayPagesRead - pages
        #expect(read >= (fromStore + 65535) / 65536 && read >= 5, "no page held more than 64 KiB of records (\(read) pages for \(fromStore) bytes)")
    }

    @Test("an instance list page of instances with large buffered actions stops at --page-bytes and gives nextCursor; following it lists every instance once, in id order")
    func listPageStopsAtItsBytes() throws {
        let server = try TestServer(.router) { $0.pageBytes = 65536 }
        let c = server.router()
        // 40 instances, each holding an action of an 8000-byte url buffered (an instance that
        // has not launched buffers it): about 8 KiB each, about 330 KiB in all.
        let ids = (0..<40).map { "big-\(1000 + $0)" }
        for id in ids {
            #expect(try c.makeInstance(id).status == 201)
            _ = try postLargeActions(c, id, count: 1, urlBytes: 8000)
        }

        let first = try c.request("GET", "/v1/instances?limit=1000")
        #expect(first.status == 200)
        let items = first.json["items"] as? [[String: Any]] ?? []
        #expect(items.allSatisfy { ((($0["bufferedAction"] as? [String: Any])?["parameters"] as? [String: Any])?["url"] as? String)?.count == 8000 }, "each holds its buffered url")
        #expect(items.count >= 2 && items.count < ids.count, "it ends early, at its bytes (\(items.count) instances)")
        #expect(first.body.count <= 65536 + 1024, "the page holds at most 64 KiB of instances, with its envelope (\(first.body.count) bytes)")
        #expect(first.json["nextCursor"] as? String == items.last?["id"] as? String && items.last != nil, "and says where to continue")

        var listed: [String] = []
        var cursor: String?
        repeat {
            let page = try c.request("GET", "/v1/instances?limit=1000" + (cursor.map { "&cursor=\($0)" } ?? "")).json
            listed += (page["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            cursor = page["nextCursor"] as? String
        } while cursor != nil && listed.count <= ids.count
        #expect(listed == ids, "every instance once, in id order")
    }

    @Test("a string parameter longer than 8192 characters gets a 422 problem and stores nothing; 8192 are taken")
    func parameterTooLong() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app")
        let before = try snapshot(c, "app")
        for url in [String(repeating: "u", count: 8193), String(repeating: "€", count: 8193)] {
            let response = try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openURL", "url": "\#(url)"}"#)
            #expect(response.status == 422)
            #expect(response.header("content-type") == "application/problem+json")
            #expect(response.json["detail"] as? String == #"parameter "url" of "openURL" is 8193 characters long; a string parameter holds at most 8192"#)
        }
        let after = try snapshot(c, "app")
        #expect(after.instance == before.instance && after.history == before.history, "nothing is stored")
        let taken = try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openURL", "url": "\#(String(repeating: "u", count: 8192))"}"#)
        #expect(taken.status == 200)
    }
}
