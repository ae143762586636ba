// Interim, until h-pgstore brings these itself (its PostgresStore predates them in the
// protocol): PostgreSQL checks its own data, and keeps it in no one file of ours.
extension PostgresStore {
    public func verifyIntegrity() throws(StoreError) {}
    public func reason(for failure: StoreError) -> StoreError { failure }
    public var databaseFile: String? { nil }
}
