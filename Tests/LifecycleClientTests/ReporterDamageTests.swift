import Foundation
import Glibc
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// A journal is input: damage in its middle costs only the entries it touched, values no
/// reporter writes are damage (never a crash or a hang), and journals of the earlier format open.
@Suite struct ReporterDamageTests {
    typealias Entry = Journal.Entry
    static let offline = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:1")!))

    /// An event item numbered `n` (its window `wN`, to find it in a history).
    static func item(_ sequence: UInt64, _ instance: String, _ n: Int) -> Entry {
        Entry(t: .item, item: QueuedItem(
            sequence: sequence, key: UUID().uuidString, instance: instance, kind: .event, name: "willConnectToWindow",
            parameters: ["window": .string("w\(n)")], model: nil, believedState: nil, ranHooks: nil, occurredAt: nil
        ))
    }

    /// Writes `entries` to `folder`'s journal as a reporter frames them; each frame's bytes.
    @discardableResult
    static func write(_ entries: [Entry], to folder: URL) throws -> [Range<Int>] {
        var (journal, _) = try Journal.open(in: folder)
        try journal.lock()
        defer { journal.unlock() }
        var at = 0
        return try journal.append(entries.map(Journal.Encoded.init), sync: true).map { size in
            defer { at += size }
            return at..<(at + size)
        }
    }

    /// Writes `entries` in the earlier format, `[length][CRC-32][payload]`.
    static func writeEarlier(_ entries: [Entry], to folder: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var bytes: [UInt8] = []
        for entry in entries {
            let payload = [UInt8](try encoder.encode(entry))
            for value in [UInt32(payload.count), CRC32.checksum(payload[...])] { bytes += (0..<4).map { UInt8(value >> (24 - $0 * 8) & 0xFF) } }
            bytes += payload
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(bytes).write(to: folder.appendingPathComponent("journal"))
    }

    /// The queue `entries` replay to.
    static func replay(_ entries: [Entry]) -> ReportQueue {
        ReportQueue(bound: .init(items: .max, bytes: .max), replaying: entries, sizes: entries.map { _ in 1 })
    }

    /// The queue the journal in `folder` holds now.
    static func pending(_ folder: URL) throws -> ReportQueue {
        replay(Journal.parse(try Data(contentsOf: folder.appendingPathComponent("journal"))).entries)
    }

    /// The numbers of `instance`'s event records, in order, and its gap records' counts.
    static func delivered(_ server: ClientTestServer, _ instance: String) throws -> (events: [Int], gaps: [Int]) {
        let records = try ReporterTests.history(server, instance)
        let events = records.filter { $0["kind"] as? String == "event" }.compactMap { (($0["parameters"] as? [String: Any])?["window"] as? String).flatMap { Int($0.dropFirst()) } }
        let gaps = records.filter { $0["kind"] as? String == "gap" }.compactMap { $0["dropped"] as? Int }
        return (events, gaps)
    }

    static func n(_ item: QueuedItem) -> Int {
        if case .string(let window) = item.parameters["window"] { return Int(window.dropFirst()) ?? -1 }
        return -1
    }

    @Test func aFlippedBitInTheMiddleCostsThatItemOnlyAndIsRecordedAsAGap() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "middle")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let frames = try Self.write((1...6).map { Self.item(UInt64($0), "middle", $0) }, to: folder)
        var bytes = try Data(contentsOf: folder.appendingPathComponent("journal"))
        bytes[frames[1].lowerBound + 60] ^= 0x04  // in the second item's payload
        try bytes.write(to: folder.appendingPathComponent("journal"))

        let events = ReporterTests.Events()
        let configuration = LifecycleReporter.Configuration(directory: folder, deliversAutomatically: false)
        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration, onEvent: events.record)
        let expected = LifecycleReporter.Damage(entries: 1, lostItems: 1, bytes: frames[1].count, gapInstance: "middle")
        #expect(events.damage == [expected])
        #expect(reporter.status.damage == expected)
        #expect(reporter.status.pendingItems == 5)
        #expect(reporter.status.unreportedDrops == ["middle": 1])
        #expect(try await reporter.flush() == 6)
        let history = try Self.delivered(server, "middle")
        #expect(history.events == [1, 3, 4, 5, 6])
        #expect(history.gaps == [1])
        // The gap is where the lost item was: after the event before it.
        let order = try ReporterTests.history(server, "middle").compactMap { record -> String? in
            record["kind"] as? String == "gap" ? "gap" : (record["parameters"] as? [String: Any])?["window"] as? String
        }
        #expect(order == ["w1", "gap", "w3", "w4", "w5", "w6"])

        // The damage was removed when the journal opened: it is not counted again.
        let again = ReporterTests.Events()
        let reopened = try LifecycleReporter(client: server.client(), configuration: configuration, onEvent: again.record)
        #expect(again.damage == [])
        #expect(reopened.status.damage == nil)
        #expect(reopened.status.pendingItems == 0)
    }

    /// What damage to each kind costs, as `Journal`'s documentation says.
    @Test func eachEntryKindsDamageCostsWhatTheDocumentationSays() throws {
        let temporary = TemporaryDirectory()
        func open(_ entries: [Entry], damaging index: Int) throws -> (LifecycleReporter.Damage?, ReportQueue) {
            let folder = URL(fileURLWithPath: temporary.path).appendingPathComponent(UUID().uuidString)
            let frames = try Self.write(entries, to: folder)
            var bytes = try Data(contentsOf: folder.appendingPathComponent("journal"))
            bytes[frames[index].lowerBound + Journal.headerSize + 3] ^= 0x01
            try bytes.write(to: folder.appendingPathComponent("journal"))
            let reporter = try LifecycleReporter(client: Self.offline, configuration: .init(directory: folder, deliversAutomatically: false))
            return (reporter.status.damage, try Self.pending(folder))
        }
        let items = (1...4).map { Self.item(UInt64($0), "kinds", $0) }
        // An ack: what it acknowledged is sent again (with its keys), nothing lost.
        var (damage, queue) = try open(Array(items[0..<2]) + [Entry(t: .ack, through: 2, gapKeys: [])] + Array(items[2...]), damaging: 2)
        #expect(damage == .init(entries: 1, lostItems: 0, bytes: damage?.bytes ?? -1))
        #expect(queue.items.map(Self.n) == [1, 2, 3, 4])
        // A drop: the items it dropped stay queued and are delivered; its gap is not sent.
        let gap = PendingGap(key: UUID().uuidString, instance: "kinds", dropped: 2)
        (damage, queue) = try open(Array(items[0..<3]) + [Entry(t: .drop, through: 2, from: 1, gaps: [gap])] + [items[3]], damaging: 3)
        #expect(damage?.entries == 1 && damage?.lostItems == 0)
        #expect(queue.items.map(Self.n) == [1, 2, 3, 4])
        #expect(queue.gaps == [])
        // A compaction's drop (gaps only): the counts of its gaps.
        (damage, queue) = try open([Entry(t: .base, nextSequence: 1), Entry(t: .drop, gaps: [gap])] + items, damaging: 1)
        #expect(damage?.entries == 1 && damage?.lostItems == 0)
        #expect(queue.items.map(Self.n) == [1, 2, 3, 4])
        #expect(queue.gaps == [])
        // A base: the next sequence number is the greatest seen plus one.
        (damage, queue) = try open([Entry(t: .base, nextSequence: 1)] + items, damaging: 0)
        #expect(damage?.entries == 1 && damage?.lostItems == 0)
        #expect(queue.nextSequence == 5)
        // An item answered by a later ack was delivered: counted, not lost.
        (damage, queue) = try open(items + [Entry(t: .ack, through: 2, gapKeys: [])], damaging: 1)
        #expect(damage == .init(entries: 1, lostItems: 0, bytes: damage?.bytes ?? -1))
        #expect(queue.items.map(Self.n) == [3, 4])
    }

    @Test func aJournalOfTheEarlierFormatOpensAndIsRewritten() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "earlier")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        try Self.writeEarlier((1...3).map { Self.item(UInt64($0), "earlier", $0) } + [Entry(t: .ack, through: 1, gapKeys: [])], to: folder)
        let reporter = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, deliversAutomatically: false))
        #expect(reporter.status.pendingItems == 2)
        #expect(reporter.status.damage == nil)
        #expect(try Data(contentsOf: folder.appendingPathComponent("journal")).first == 0xFF, "rewritten in the current format")
        try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("w4")], instance: "earlier")
        #expect(try await reporter.flush() == 3)
        #expect(try Self.delivered(server, "earlier").events == [2, 3, 4])
    }

    /// Values no reporter writes: each is one damaged entry, and the rest is delivered.
    @Test(arguments: [
        ("a sequence number of UInt64.max", Entry(t: .item, item: Self.item(UInt64.max, "crafted", 99).item)),
        ("a sequence number going backwards", Self.item(1, "crafted", 99)),
        ("an ack past the last item", Entry(t: .ack, through: 1_000, gapKeys: [])),
        ("a reversed drop", Entry(t: .drop, through: 1, from: 2, gaps: [])),
        ("a huge gap", Entry(t: .drop, gaps: [PendingGap(key: "k", instance: "crafted", dropped: .max)])),
        ("a negative gap", Entry(t: .drop, gaps: [PendingGap(key: "k", instance: "crafted", dropped: -5)])),
        ("a base of UInt64.max", Entry(t: .base, nextSequence: .max)),
    ])
    func aCraftedValueIsDamageAndTheRestIsDelivered(_ label: String, _ crafted: Entry) async throws {
        let server = try ClientTestServer()
        let instance = "crafted"
        _ = try await server.client().createInstance(id: instance)
        let temporary = TemporaryDirectory()
        for earlier in [false, true] {
            let folder = URL(fileURLWithPath: temporary.path).appendingPathComponent(earlier ? "earlier" : "current")
            let entries = [Self.item(1, instance, 1), Self.item(2, instance, 2), crafted, Self.item(3, instance, 3)]
            if earlier { try Self.writeEarlier(entries, to: folder) } else { try Self.write(entries, to: folder) }
            let reporter = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, deliversAutomatically: false))
            #expect(reporter.status.damage?.entries == 1, "\(label)")
            #expect(reporter.status.pendingItems == 3, "\(label)")
            // A damaged item is lost, and its gap is sent with the rest.
            let gaps = reporter.status.unreportedDrops.count
            #expect(try await reporter.flush() == 3 + gaps, "\(label)")
        }
        #expect(try Self.delivered(server, instance).events == [1, 2, 3, 1, 2, 3])
    }

    /// The damaged entries of `entries`, as a reporter opening the journal counts them, and the
    /// queue it keeps; `damage` changes the file's bytes, given each frame's.
    static func open(_ entries: [Entry], in folder: URL, damage: (inout Data, [Range<Int>]) -> Void) throws -> (LifecycleReporter.Status, ReportQueue) {
        let frames = try write(entries, to: folder)
        var bytes = try Data(contentsOf: folder.appendingPathComponent("journal"))
        damage(&bytes, frames)
        try bytes.write(to: folder.appendingPathComponent("journal"))
        let reporter = try LifecycleReporter(client: offline, configuration: .init(directory: folder, deliversAutomatically: false))
        return (reporter.status, try pending(folder))
    }

    /// An ack covering a damaged item answers it: the ack is whole (not crafted), nothing is
    /// lost and nothing it acknowledged is sent again.
    @Test func anAckAfterADamagedItemAnswersIt() throws {
        let folder = URL(fileURLWithPath: TemporaryDirectory().path)
        let entries = (1...10).map { Self.item(UInt64($0), "acked", $0) } + [Entry(t: .ack, through: 10, gapKeys: [])]
        let (status, queue) = try Self.open(entries, in: folder) { bytes, frames in bytes[frames[9].lowerBound + Journal.headerSize + 3] ^= 0x01 }
        #expect(status.damage == .init(entries: 1, lostItems: 0, bytes: Self.frames(entries)[9]))
        #expect(queue.items.isEmpty)
    }

    /// After a compaction (a base above the items it kept), a damaged item takes the number
    /// after the last item read, so a later ack through it answers it.
    @Test func aDamagedItemAfterACompactionIsNumberedAfterTheLastItemRead() throws {
        let folder = URL(fileURLWithPath: TemporaryDirectory().path)
        let entries = [Entry(t: .base, nextSequence: 61)] + (50...55).map { Self.item(UInt64($0), "compacted", $0) } + [Entry(t: .ack, through: 55, gapKeys: [])]
        let (status, queue) = try Self.open(entries, in: folder) { bytes, frames in bytes[frames[3].lowerBound + Journal.headerSize + 3] ^= 0x01 }
        #expect(status.damage?.entries == 1)
        #expect(status.damage?.lostItems == 0)
        #expect(queue.items.isEmpty)
        #expect(queue.gaps.isEmpty)
    }

    /// A flipped bit that makes the last entry's length run past the end is damage, not a torn
    /// write: the item was whole (its report returned), so it is counted lost and recorded as a gap.
    @Test func aLastEntryWhoseLengthWasDamagedCostsItsItem() throws {
        let folder = URL(fileURLWithPath: TemporaryDirectory().path)
        let entries = (1...6).map { Self.item(UInt64($0), "tail", $0) }
        let (status, queue) = try Self.open(entries, in: folder) { bytes, frames in bytes[frames[5].lowerBound + 2] ^= 0x01 }  // "0" to "1": 2²⁸ more
        #expect(status.damagedTailBytes == 0)
        #expect(status.damage?.entries == 1)
        #expect(status.damage?.lostItems == 1)
        #expect(queue.items.map(Self.n) == [1, 2, 3, 4, 5])
        #expect(queue.gaps.map(\.dropped) == [1])
    }

    /// A 0xFF flipped into the last entry's payload is damage to that entry, not a second one.
    @Test func aMarkerFlippedIntoTheLastEntryCostsThatEntryOnly() throws {
        let folder = URL(fileURLWithPath: TemporaryDirectory().path)
        let entries = (1...6).map { Self.item(UInt64($0), "marker", $0) }
        let (status, queue) = try Self.open(entries, in: folder) { bytes, frames in bytes[frames[5].lowerBound + Journal.headerSize + 3] = 0xFF }
        #expect(status.damage?.entries == 1)
        #expect(status.damage?.lostItems == 1)
        #expect(queue.items.map(Self.n) == [1, 2, 3, 4, 5])
    }

    /// The frame sizes of `entries` written from the start of a journal.
    static func frames(_ entries: [Entry]) -> [Int] { entries.map { (try? Journal.frameSize($0)) ?? -1 } }

    /// Reading is linear however many lost items later acks must look through: damaged items
    /// (one garbage byte each) alternating with whole acks that answer none.
    @Test func readingManyAcksAfterManyLostItemsTakesTimeLinearInTheirSize() throws {
        var bytes: [UInt8] = []
        var ordinal: UInt32 = 0
        var itemsBefore: UInt32 = 0
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        func hex(_ value: UInt32) -> [UInt8] { Array(String(format: "%08x", value).utf8) }
        let payload = [UInt8](try encoder.encode(Entry(t: .ack, through: 0, gapKeys: [])))
        while bytes.count < 2 << 20 {
            // The garbage byte is an entry (ordinal) and an item: the ack's header says so.
            bytes.append(0x00)
            ordinal += 1
            itemsBefore += 1
            let header = [UInt8(0x61)] + hex(UInt32(payload.count)) + hex(ordinal) + hex(itemsBefore)
            let checksum = CRC32.finish(CRC32.update(CRC32.update(CRC32.start, header[...]), payload[...]))
            bytes += [0xFF] + header + hex(checksum) + payload
            ordinal += 1
        }
        let start = ContinuousClock.now
        let parsed = Journal.parse(bytes)
        #expect(parsed.entries.count == Int(ordinal) / 2)
        #expect(parsed.damage?.lostItems == Int(itemsBefore))
        #expect(ContinuousClock.now - start < .seconds(5), "a quadratic reading takes minutes here")
    }

    /// Reading is linear: a file of candidates that each look like a frame running to the end.
    @Test func readingCraftedBytesTakesTimeLinearInTheirSize() {
        var bytes: [UInt8] = []
        let size = 2 << 20
        while bytes.count < size {
            bytes += [0xFF, 0x69] + Array(String(format: "%08x", 1 << 20).utf8) + Array(repeating: 0x30, count: 24) + Array(repeating: 0x7B, count: 20)
        }
        let start = ContinuousClock.now
        let parsed = Journal.parse(bytes)
        #expect(parsed.entries.isEmpty)
        #expect(ContinuousClock.now - start < .seconds(5), "a quadratic reading takes minutes here")
    }

    /// Point 13: damage at seeded random offsets of a journal of items, acks and drops; each
    /// time every whole item is queued once, in order, and every damaged entry is counted.
    @Test func damageAtSeededOffsetsCostsOnlyTheEntriesItTouched() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        var random = SeededRandom(seed: 31)
        for variant in 0..<240 {
            let instance = "seeded-\(String(format: "%03d", variant))"
            let folder = URL(fileURLWithPath: temporary.path).appendingPathComponent(instance)
            let gapKey = UUID().uuidString
            var entries = (1...12).map { Self.item(UInt64($0), instance, $0) }
            entries.append(Entry(t: .ack, through: 5, gapKeys: []))
            entries += (13...20).map { Self.item(UInt64($0), instance, $0) }
            entries.append(Entry(t: .drop, through: 9, from: 7, gaps: [PendingGap(key: gapKey, instance: instance, dropped: 3)]))
            entries += (21...30).map { Self.item(UInt64($0), instance, $0) }
            entries.append(Entry(t: .ack, through: 14, gapKeys: [gapKey]))
            entries += (31...36).map { Self.item(UInt64($0), instance, $0) }
            let frames = try Self.write(entries, to: folder)
            var bytes = [UInt8](try Data(contentsOf: folder.appendingPathComponent("journal")))

            let damaged: Range<Int>
            switch variant % 6 {
            case 0, 1, 2:
                let at = random.next(below: bytes.count)
                bytes[at] ^= UInt8(1 + random.next(below: 255))
                damaged = at..<(at + 1)
            case 3, 4:
                let at = random.next(below: bytes.count)
                damaged = at..<min(bytes.count, at + 1 + random.next(below: 400))
                for index in damaged { bytes[index] = 0 }
            default:
                let at = random.next(below: bytes.count)
                damaged = at..<bytes.count
                bytes.removeSubrange(at...)
            }
            try Data(bytes).write(to: folder.appendingPathComponent("journal"))
            let touched = Set(frames.indices.filter { frames[$0].overlaps(damaged) })
            let whole = entries.indices.filter { !touched.contains($0) }.map { entries[$0] }
            let expected = Self.replay(whole)

            let events = ReporterTests.Events()
            let delivers = variant % 24 == 0
            if delivers { _ = try await server.client().createInstance(id: instance) }
            let reporter = try LifecycleReporter(
                client: delivers ? server.client() : Self.offline, configuration: .init(directory: folder, deliversAutomatically: false), onEvent: events.record
            )
            let status = reporter.status
            let queue = try Self.pending(folder)
            let context = "variant \(variant), damage \(damaged), touched \(touched.sorted())"
            #expect(queue.items.map(\.key) == expected.items.map(\.key), "\(context)")
            let counted = (status.damage?.entries ?? 0) + (status.damagedTailBytes > 0 ? 1 : 0)
            if variant % 6 == 5 {
                // A cut is a torn write: the entries after it were never there.
                #expect(status.damage == nil, "\(context)")
            } else if touched.contains(entries.count - 1) && variant % 6 >= 3 {
                // Zeros over the last entry's marker read as what a crash leaves: a torn write.
                // (A flipped bit never does: a length past the end with a whole payload is damage.)
                #expect(counted >= 1, "\(context)")
            } else {
                #expect(status.damage?.entries == touched.count, "\(context)")
                #expect(events.damage == [status.damage].compactMap { $0 }, "\(context)")
                // A damaged item is lost unless a whole later entry answered or dropped it.
                let lost = touched.filter { index in
                    guard let sequence = entries[index].item?.sequence else { return false }
                    return !entries[(index + 1)...].enumerated().contains { offset, later in
                        guard !touched.contains(index + 1 + offset) else { return false }
                        if later.t == .ack { return (later.through ?? 0) >= sequence }
                        if later.t == .drop, let from = later.from, let through = later.through { return (from...through).contains(sequence) }
                        return false
                    }
                }.count
                #expect(status.damage?.lostItems == lost, "\(context)")
                let gaps = expected.gaps.map(\.dropped) + (lost > 0 ? [lost] : [])
                #expect(queue.gaps.map(\.dropped) == gaps, "\(context)")
                #expect(queue.gaps.allSatisfy { $0.instance == instance }, "\(context)")
            }
            if delivers {
                _ = try await reporter.flush()
                let history = try Self.delivered(server, instance)
                #expect(history.events == expected.items.map(Self.n), "\(context)")
                #expect(history.gaps == queue.gaps.map(\.dropped), "\(context)")
            }
        }
    }

    @Test func flushOnACraftedJournalDeliversTheRestAndSaysWhatWasSkipped() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "cli")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        try Self.writeEarlier([Self.item(1, "cli", 1), Entry(t: .item, item: Self.item(UInt64.max, "cli", 2).item), Self.item(2, "cli", 3)], to: folder)
        let (status, stderr) = try await Self.lifecycled(["flush", "--queue", folder.path, "--server", server.url.absoluteString])
        #expect(status == 0, "\(stderr)")
        #expect(stderr.contains("1 damaged journal entry"), "\(stderr)")
        #expect(try Self.delivered(server, "cli").events == [1, 3])
    }

    /// Runs the `lifecycled` built beside the tests with `arguments`, for at most 30 s; its exit
    /// status (-1: killed at the deadline) and standard error.
    static func lifecycled(_ arguments: [String]) async throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lifecycled")
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationReason == .exit ? process.terminationStatus : -1, stderr)
    }
}

/// SplitMix64: the same variants on every run.
struct SeededRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
