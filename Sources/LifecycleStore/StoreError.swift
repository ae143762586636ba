import Foundation

/// Why the store could not do what it was asked. Nothing was written.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// Whether the disk is full.
    public var isDiskFull: Bool
    /// Whether the failure lies in what was being written rather than the store: other writes can still commit.
    public var isSpecificToWrite: Bool
    /// Whether the database file is damaged (see ``SQLiteError/isDamage``).
    public var isDamage: Bool
    /// Whether the store refused to open because committed data is gone (see ``SQLiteStore/Options/acceptDataLoss``).
    public var isDataLoss: Bool
    /// Whether the database server could not be reached; the store connects again by itself.
    public var isUnreachable: Bool
    /// Whether the transaction may have committed all the same: the connection was lost after its COMMIT was sent.
    public var isOutcomeUnknown: Bool

    public init(
        _ message: String, isDiskFull: Bool = false, isSpecificToWrite: Bool = false, isDamage: Bool = false, isDataLoss: Bool = false,
        isUnreachable: Bool = false, isOutcomeUnknown: Bool = false
    ) {
        self.message = message
        self.isDiskFull = isDiskFull
        self.isSpecificToWrite = isSpecificToWrite
        self.isDamage = isDamage
        self.isDataLoss = isDataLoss
        self.isUnreachable = isUnreachable
        self.isOutcomeUnknown = isOutcomeUnknown
    }

    public var description: String { message }
}

/// Something the store noticed that an operator should know of, for the handler whoever opens it passes.
public struct StoreEvent: Sendable {
    public enum Level: Sendable {
        case info, warning, error
    }

    public var level: Level
    public var message: String
    public var fields: [(key: String, value: String)]

    public init(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String> = [:]) {
        self.init(level, message, fields: fields.map { ($0.key, $0.value) })
    }

    /// As ``init(_:_:_:)``, for fields assembled at run time.
    public init(_ level: Level, _ message: String, fields: [(key: String, value: String)]) {
        self.level = level
        self.message = message
        self.fields = fields
    }

    /// `level message key=value ...` on standard error: for a store opened without a logger.
    @Sendable public static func writeToStandardError(_ event: StoreEvent) {
        let fields = event.fields.map { " \($0.key)=\($0.value.debugDescription)" }.joined()
        FileHandle.standardError.write(Data("\(event.level) \(event.message)\(fields)\n".utf8))
    }
}

/// An error of a store's database library, which says what it means for the store.
protocol StoreFailure: Error {
    /// The failure of doing `what`.
    func storeError(doing what: String) -> StoreError
}

extension StoreError {
    init(_ failure: some StoreFailure, doing what: String) { self = failure.storeError(doing: what) }
}

/// Runs database work, turning its error into a ``StoreError`` that says what was being done.
func checked<T, Failure: StoreFailure>(_ what: String, _ body: () throws(Failure) -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch {
        throw StoreError(error, doing: what)
    }
}
