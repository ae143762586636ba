import Testing
@testable import LifecycleHTTP

@Suite("Host header values")
struct HostNameTests {
    @Test("host[:port] is parsed to a lowercased name without its port or trailing dot", arguments: [
        ("127.0.0.1:8080", "127.0.0.1", true),
        ("[::1]:8080", "::1", true),
        ("[::1]", "::1", true),
        ("LocalHost.", "localhost", false),
        ("app.localhost:3000", "app.localhost", false),
        ("box.example:", "box.example", false),
        ("", "", false),
        ("1.2.3", "1.2.3", false),
    ])
    func parsed(value: String, name: String, isAddress: Bool) {
        let host = HostName(value)
        #expect(host?.name == name && host?.isAddress == isAddress, "\(value)")
    }

    @Test("anything else is not a Host", arguments: ["a b", "a/b", "user@a", "[::1", "[a.b]", "[::1]x", "a:80x", "a:b:1", "é.example"])
    func refused(value: String) {
        #expect(HostName(value) == nil)
    }
}
