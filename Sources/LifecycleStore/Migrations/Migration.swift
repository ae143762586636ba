/// One named change of a schema. A store runs those its database has not had, in order, and
/// records how many have run: the name is for readers and messages, the position is the version.
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
    /// Those a database at schema `version` has not had; throws `newer` (made from a message)
    /// for a database of a later lifecycled.
    func pending<Failure: Error>(after version: Int, newer: (String) -> Failure) throws(Failure) -> ArraySlice<Migration> {
        guard version <= count else { throw newer("schema version \(version) is newer than this lifecycled knows (\(count))") }
        return self[version...]
    }
}
