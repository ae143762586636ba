import Foundation
import LifecycleTestSupport
import Testing

/// `flush --queue` on a full disk (issue 31, point 6), on a real tmpfs: when the batch's answer
/// cannot be journaled it stops with exit 1 naming the disk, not resending the batch in a loop,
/// and once there is room it delivers every item exactly once.
@Suite("flush on a full disk", .serialized)
struct FullDiskCommandTests {
    @Test("flush --queue whose journal cannot take the answer exits 1 naming the disk; with room, each item is stored once")
    func flushOnAFullDisk() throws {
        let disk = try SmallDisk(kilobytes: 256)
        let queue = disk.path + "/queue"
        let journal = queue + "/journal"
        let data = TemporaryDirectory()
        let port = freePort()
        // Queued with the service down. tmpfs gives a file its space a page at a time, so the
        // last event's hooks pad the journal to a page's end: an answer that fit the last
        // page's slack would be written on a full disk.
        let events = ["didFinishLaunching", "didBecomeActive", "willResignActive"]
        var growth = 0
        for (index, event) in events.enumerated() {
            let before = FileManager.default.fileExists(atPath: journal) ? try SmallDisk.size(of: journal) : 0
            var hooks = ["p"]
            if index == events.count - 1 {
                let plain = growth + event.utf8.count - events[index - 1].utf8.count
                hooks = SmallDisk.hooks(endingAPage: before + plain)
            }
            let run = try lifecycledCommand(["post", "--queue", queue, "--ran", hooks.joined(separator: ","), "full-1", event], port: port)
            #expect(run.status == 0 && run.stdout == "queued\n", "\(run.stdout) \(run.stderr)")
            growth = try SmallDisk.size(of: journal) - before
        }
        try #require(try SmallDisk.size(of: journal) % SmallDisk.pageSize == 0)

        let server = try LifecycledProcess.serving(dataDirectory: data.path, port: port)
        let c = try WireClient(port: port)
        try c.makeInstance("full-1")
        try disk.fill()
        var run = try lifecycledCommand(["flush", "--queue", queue], port: port, within: 20)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(run.stderr == "lifecycled flush: cannot write the queue's journal in \(queue): No space left on device (ENOSPC)\n", "\(run.stderr)")
        #expect(try c.fullHistory("full-1").compactMap { $0["event"] as? String } == events, "the batch was stored once, its answer not journaled")

        try disk.free()
        run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 0 && run.stdout == "\(events.count)\n", "\(run.stdout) \(run.stderr)")
        #expect(try c.fullHistory("full-1").compactMap { $0["event"] as? String } == events, "sent again with its keys: each stored once")
        withExtendedLifetime((server, disk)) {}  // the folder stays mounted, the service up, to the end
    }

    @Test("post --queue and flush with the queue's disk full at a seeded random distance from the journal's end, 20 runs; with room again, every acknowledged post is stored exactly once, in order")
    func fillingDisk() throws {
        let disk = try SmallDisk(kilobytes: 512)
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        let nobody = freePort()
        var refused = (writes: 0, answers: 0)

        for run in 0..<20 {
            var random = SeededGenerator(state: UInt64(run))
            let id = "filling-\(run)"
            let queue = disk.path + "/queue-\(run)"
            let journal = queue + "/journal"
            try c.makeInstance(id, events: coldStart)
            /// Tags (`ranHooks`) in the order posted, and whether the post was acknowledged (exit 0 or 3).
            var posted: [(tag: String, acknowledged: Bool)] = []
            func post(_ port: UInt16, hooks pad: [String]) throws {
                let tag = "run\(run)-item\(posted.count)"
                let hooks = [tag] + pad
                let result = try lifecycledCommand(["post", "--queue", queue, "--ran", hooks.joined(separator: ","), id, "willResignActive"], port: port)
                #expect([0, 1, 3].contains(result.status), "run \(run): post \(tag) exited \(result.status): \(result.stdout) \(result.stderr)")
                noteDisk(result, "post \(tag)")
                posted.append((tag, result.status != 1))
            }
            /// A command that exits 1 says why: the disk.
            func noteDisk(_ result: (status: Int32, stdout: String, stderr: String), _ what: String) {
                guard result.status == 1 else { return }
                #expect(result.stderr.contains("No space left on device"), "run \(run): \(what) exited 1 for another reason: \(result.stderr)")
                if result.stderr.contains("not queued") { refused.writes += 1 } else { refused.answers += 1 }
            }

            for _ in 0..<Int.random(in: 1...3, using: &random) {
                try post(Bool.random(using: &random) ? server.port : nobody, hooks: SmallDisk.hooks(jsonBytes: Int.random(in: 5...3000, using: &random)))
            }
            // Two posts kept queued (nothing else written between them): the first measures an
            // entry, the second ends the journal a random few bytes short of a page's end, where
            // an item does not fit and an answer (some 44 bytes) may or may not.
            var before = try SmallDisk.size(of: journal)
            try post(nobody, hooks: ["p"])
            let growth = try SmallDisk.size(of: journal) - before
            before += growth
            let short = Int.random(in: 0..<120, using: &random)
            try post(nobody, hooks: SmallDisk.hooks(endingAPage: before + growth, short: short))
            let end = try SmallDisk.size(of: journal)
            try #require((SmallDisk.pageSize - end % SmallDisk.pageSize) % SmallDisk.pageSize == short, "run \(run): ends at \(end)")

            try disk.fill()
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                try post(Bool.random(using: &random) ? server.port : nobody, hooks: SmallDisk.hooks(jsonBytes: Int.random(in: 5...3000, using: &random)))
            }
            let full = try lifecycledCommand(["flush", "--queue", queue], port: server.port, within: 10)
            #expect([0, 1].contains(full.status), "run \(run): flush on the full disk exited \(full.status): \(full.stderr)")
            noteDisk(full, "flush")

            try disk.free()
            let last = try lifecycledCommand(["flush", "--queue", queue], port: server.port)
            #expect(last.status == 0, "run \(run): \(last.stdout) \(last.stderr)")
            #expect(try lifecycledCommand(["flush", "--queue", queue], port: server.port).stdout == "0\n", "run \(run): the queue is empty")
            let tags = try c.fullHistory(id).filter { ($0["version"] as? Int ?? 0) > coldStart.count }.compactMap { ($0["ranHooks"] as? [String])?.first }
            #expect(Set(tags).count == tags.count, "run \(run): an item stored twice: \(tags)")
            #expect(tags == posted.map(\.tag).filter(tags.contains), "run \(run): stored out of order, or not what was posted: \(tags)")
            for item in posted where item.acknowledged {
                #expect(tags.contains(item.tag), "run \(run): \(item.tag) was acknowledged but is not stored")
            }
        }
        print("full disk: \(refused.writes) commands refused writing an item, \(refused.answers) writing an answer")
        #expect(refused.writes > 0 && refused.answers > 0, "the disk filled under both kinds of write: \(refused)")
        withExtendedLifetime((server, disk)) {}  // the folder stays mounted, the service up, to the end
    }
}
