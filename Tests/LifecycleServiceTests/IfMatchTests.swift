import Testing
@testable import LifecycleService
@testable import MicroHTTP

@Suite("If-Match", .sqliteOnly("parses headers; opens no store"))
struct IfMatchTests {
    static func versions(_ value: String?) throws(Problem) -> [Int64]? {
        try Request(method: "POST", path: "/", headers: value.map { [("if-match", $0)] } ?? []).expectedVersions()
    }

    @Test("lists of strong tags, a bare version, *, and weak or foreign tags that match nothing")
    func parsing() throws {
        #expect(try Self.versions(nil) == nil)
        #expect(try Self.versions("*") == nil)
        #expect(try Self.versions(" * ") == nil)
        #expect(try Self.versions(#""3""#) == [3])
        #expect(try Self.versions("3") == [3])
        #expect(try Self.versions(#""3", "4""#) == [3, 4])
        #expect(try Self.versions(#" "3" ,, "4" , "#) == [3, 4])
        #expect(try Self.versions(#"W/"3", "5""#) == [5])
        #expect(try Self.versions(#""abc", "a,b""#) == [])
        for bad in ["", "*, \"3\"", "\"3", "3, 4", "\"3\" \"4\"", "W/3", "-1", "x"] {
            #expect(throws: Problem.self, "\(bad)") { try Self.versions(bad) }
        }
    }
}
