import Foundation
import TestSupport
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
                hooks = SmallDisk.hooks(jsonBytes: 5 + (SmallDisk.pageSize - (before + plain) % SmallDisk.pageSize) % SmallDisk.pageSize)
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
        #expect(run.stderr == "lifecycled flush: cannot write the queue's journal in \(queue): No space left on device\n", "\(run.stderr)")
        #expect(try c.fullHistory("full-1").compactMap { $0["event"] as? String } == events, "the batch was stored once, its answer not journaled")

        try disk.free()
        run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 0 && run.stdout == "\(events.count)\n", "\(run.stdout) \(run.stderr)")
        #expect(try c.fullHistory("full-1").compactMap { $0["event"] as? String } == events, "sent again with its keys: each stored once")
        _ = server
    }
}
