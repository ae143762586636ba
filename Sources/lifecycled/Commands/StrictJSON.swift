import Foundation
import LifecycleHTTP

/// A file a command reads must be JSON as RFC 8259 writes it: Foundation's parsers take a
/// trailing comma (`[1,]`, `{"a": 1,}`) on purpose, as a convenience
/// (swift-corelibs-foundation#4682), so a file someone edited by hand would be read as they
/// did not write it. The service's own parser, which refuses trailing commas, comments and
/// duplicate members, says first whether it is; Foundation's decoder then reads it.
enum StrictJSON {
    /// Throws a bad command line naming `path` and where the file stops being JSON.
    static func check(_ data: Data, path: String) throws(UsageError) {
        do {
            _ = try JSONParser.parse([UInt8](data))
        } catch {
            throw UsageError("\(path) is not JSON: \(error)")
        }
    }
}
