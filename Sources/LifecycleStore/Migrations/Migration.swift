/// One named change of a schema; its position in the list is the schema version it makes.
struct Migration: Sendable {
    let name: String
    /// Run one after the other (PostgreSQL runs one statement per call; SQLite takes scripts).
    let statements: [String]

    init(_ name: String, _ statements: String...) {
        self.name = name
        self.statements = statements
    }
}

extension [Migration] {
    /// Those a database at schema `version` has not had; throws `newer` for one of a later lifecycled.
    func pending<Failure: Error>(after version: Int, newer: (String) -> Failure) throws(Failure) -> ArraySlice<Migration> {
        guard version <= count else { throw newer("schema version \(version) is newer than this lifecycled knows (\(count))") }
        return self[version...]
    }
}
