import Testing
@testable import LifecycleService
@testable import LifecycleHTTP

@Suite("If-Match", .sqliteOnly("parses headers; opens no store"))
struct IfMatchTests {
    static func versions(_ value: String?) throws(Problem) -> [Int64]? {
        try tags(value)?.map { tag in
            #expect(tag.createdAt == nil, "\(value ?? "")")
            return tag.version
        }
    }

    static func tags(_ value: String?) throws(Problem) -> [InstanceRegistry.InstanceTag]? {
        try Request(method: "POST", path: "/", headers: value.map { [("if-match", $0)] } ?? []).expectedTags()
    }

    @Test("an instance's ETag names its version and creation; the opaque parts that are no instance's match nothing")
    func instanceTags() throws {
        typealias Tag = InstanceRegistry.InstanceTag
        #expect(try Self.tags(#""3-1764650000123""#) == [Tag(version: 3, createdAt: 1_764_650_000_123)])
        #expect(try Self.tags(#""0-5", "3""#) == [Tag(version: 0, createdAt: 5), Tag(version: 3)])
        #expect(try Self.tags(#"W/"3-5""#) == [])
        for foreign in [#""3-""#, #""-5""#, #""3-5-6""#, #""3-x""#, #""3--5""#, #""٣-5""#, #""+3""#, #""3-+5""#, #""03-5""#, #""3-05""#, #""03""#, #""-0""#] {
            #expect(try Self.tags(foreign) == [], "\(foreign)")
        }
        #expect(Tag(version: 3, createdAt: 1_764_650_000_123).etag == #""3-1764650000123""#)
        #expect(Tag(Tag("3-1764650000123")!.etag.dropFirst().dropLast()) == Tag(version: 3, createdAt: 1_764_650_000_123))
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
