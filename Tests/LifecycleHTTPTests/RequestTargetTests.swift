import Testing
@testable import LifecycleHTTP

@Suite("request target")
struct RequestTargetTests {
    static func parse(_ text: String) -> RequestTarget? { try? RequestTarget(Array(text.utf8)) }

    /// The query as `name=value` texts, for comparing.
    static func query(_ text: String) -> [String]? { parse(text)?.query.map { "\($0.name)=\($0.value)" } }

    @Test("origin and absolute forms, decoding")
    func forms() {
        #expect(Self.parse("/v1/instances/a.b_c-D9")?.path == "/v1/instances/a.b_c-D9")
        #expect(Self.parse("/v1//x/")?.path == "/v1//x/")
        #expect(Self.parse("/%41%62")?.path == "/Ab")
        #expect(Self.parse("/.../a..b/.c")?.path == "/.../a..b/.c")
        let absolute = Self.parse("http://example.com:8080/healthz?x=1")
        #expect(absolute?.path == "/healthz" && Self.query("http://example.com:8080/healthz?x=1") == ["x=1"])
        #expect(Self.parse("HTTPS://example.com")?.path == "/")
        #expect(Self.parse("http://example.com?a")?.path == "/" && Self.query("http://example.com?a") == ["a="])
        #expect(Self.query("/?a=1&&b=%C3%A9+x&c&=&d=%3D") == ["a=1", "b=é+x", "c=", "=", "d=="])
    }

    @Test("refused targets", arguments: [
        "", "*", "example.com:80", "v1/instances", "/a%00b", "/a%2", "/a%g0", "/a b", "/a~b", "/a/./b", "/..", "/a/%2E%2E", "/é",
        "/?x=%00", "/?x=%ff", "/?x=a%0db", "/?%7F=1", "/a/.", "/.", "/a%", "httpx://h/", "http:/h/", "ftp://h/",
    ])
    func refused(target: String) {
        #expect(Self.parse(target) == nil, "\(target)")
    }
}
