import Foundation

/// How much one page of records may hold: `records` of them, and `bytes` of their JSON unless one record alone is
/// bigger. A client that does not read thus pins a page per connection at most.
public struct PageLimit: Sendable, Equatable {
    /// The default of `--page-bytes`: far above 1000 typical records, about 250 of 16 KiB (an 8192-character url).
    public static let defaultBytes = 4 * 1024 * 1024

    /// The most records on a page (at least 1).
    public var records: Int
    /// The most bytes of records' JSON on a page of more than one record.
    public var bytes: Int

    /// At most `records` records (1 if fewer is asked) and `bytes` bytes of them.
    public init(records: Int, bytes: Int = PageLimit.defaultBytes) {
        self.records = max(1, records)
        self.bytes = bytes
    }
}

/// A page being filled from rows in order, within its ``PageLimit`` (both stores and the instance list).
public struct PageFill {
    /// What the page holds at most.
    public let limit: PageLimit
    private var count = 0
    private var bytes = 0
    /// Whether a row was turned away: the page ends before it, and more follow.
    public private(set) var turnedAway = false

    /// An empty page within `limit`.
    public init(_ limit: PageLimit) {
        self.limit = limit
    }

    /// Whether the page can take no more: a row was turned away, or it holds `limit.records`.
    public var isFull: Bool { turnedAway || count >= limit.records }

    /// Takes a record of `size` bytes if the page has room for it; once it has not, no later one.
    public mutating func admits(size: Int) -> Bool {
        guard !turnedAway, count < limit.records, count == 0 || bytes + size <= limit.bytes else {
            turnedAway = true
            return false
        }
        count += 1
        bytes += size
        return true
    }
}

/// One page of a replay of all instances' records, in sequence order.
public struct ReplayPage: Sendable {
    /// The matching records, oldest first.
    public var records: [ReplayedRecord]
    /// Every matching record kept up to this sequence number is on this page or an earlier one.
    public var coveredThrough: Int64
    /// The largest sequence number retention (or accepted data loss) ever dropped, 0 if none: a replay from before may lack records.
    public var droppedThrough: Int64
    /// The oldest sequence number still kept, or `nil` when none is.
    public var oldestKept: Int64?
}

/// One page of an instance's history, oldest first.
public struct HistoryPage: Sendable {
    /// Each record's JSON, as stored.
    public var records: [[UInt8]]
    /// Sequence number of the last record on the page.
    public var lastSequence: Int64?
    /// Whether more records follow this page.
    public var hasMore: Bool
    /// The oldest version still kept; greater than 1 when retention dropped older ones.
    public var oldestRetainedVersion: Int64?
    /// The sequence number of that oldest record kept: on the numbering `after` pages by.
    public var oldestRetainedSequence: Int64?
}
