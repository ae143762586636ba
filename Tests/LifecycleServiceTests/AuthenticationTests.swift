import Foundation
import LifecycleTestSupport
import LifecycleHTTP
import Testing
@testable import LifecycleService
@testable import LifecycleStore

/// Bearer-token authentication end to end: the real service over loopback.
@Suite("authentication")
struct AuthenticationTests {
    static let token = "s3cret.T0ken_for-tests~"
    static let bearer = [("Authorization", "Bearer \(token)")]

    /// Every write route, with a body it would accept.
    static let writes: [(method: String, path: String, body: String?)] = [
        ("POST", "/v1/instances", "{}"),
        ("PUT", "/v1/instances/other", #"{"model": "ios-app"}"#),
        ("DELETE", "/v1/instances/app", nil),
        ("POST", "/v1/instances/app/events", #"{"event": "willResignActive"}"#),
        ("POST", "/v1/instances/app/actions", #"{"action": "openURL"}"#),
        ("POST", "/v1/instances/app/relaunches", nil),
    ]
    static let reads = ["/v1/models", "/v1/models/ios-app", "/v1/instances", "/v1/instances/app", "/v1/instances/app/history"]
    static let streams = ["/v1/stream", "/v1/instances/app/stream"]
    static let files = ["/", "/index.html", "/js/app.js"]

    /// A server with the token and an instance `app` that is in the foreground.
    static func guardedServer(protectReads: Bool) throws -> TestServer {
        let server = try TestServer {
            $0.token = token
            $0.protectReads = protectReads
        }
        let c = try server.connect()
        #expect(try c.request("PUT", "/v1/instances/app", json: "{}", headers: bearer).status == 201)
        for event in coldStart {
            let body = event == "willConnectToWindow" ? #"{"event": "willConnectToWindow", "window": "main"}"# : #"{"event": "\#(event)"}"#
            #expect(try c.event("app", body, headers: bearer).status == 200)
        }
        return server
    }

    /// A 401 as RFC 6750 and RFC 9457 describe it.
    static func expectRefused(
        _ response: HTTPResponse, wrongToken: Bool = false, isHead: Bool = false, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(response.status == 401, "\(what): \(response.status) \(response.text)", sourceLocation: sourceLocation)
        #expect(response.header("www-authenticate") == (wrongToken ? #"Bearer error="invalid_token""# : "Bearer"), "\(what)", sourceLocation: sourceLocation)
        #expect(response.header("content-type") == "application/problem+json", "\(what)", sourceLocation: sourceLocation)
        guard !isHead else { return }
        #expect(response.json["status"] as? Int == 401 && response.json["title"] as? String == "Unauthorized", "\(what)", sourceLocation: sourceLocation)
    }

    /// Sends a write on a connection of its own: a refused write with a body closes its connection.
    func send(_ server: TestServer, _ write: (method: String, path: String, body: String?), headers: [(String, String)] = []) throws -> HTTPResponse {
        try server.connect().request(write.method, write.path, headers: headers, body: write.body.map { Array($0.utf8) })
    }

    @Test("with a token, every write needs it and changes nothing without it; reads, streams, files and /healthz stay open")
    func writesNeedTheToken() throws {
        let server = try Self.guardedServer(protectReads: false)
        let c = try server.connect()
        let before = try c.request("GET", "/v1/instances/app").body
        for write in Self.writes {
            Self.expectRefused(try send(server, write), "\(write.method) \(write.path) without a token")
            Self.expectRefused(try send(server, write, headers: [("Authorization", "Bearer wrong")]), wrongToken: true, "\(write.method) \(write.path) with a wrong token")
        }
        #expect(try c.request("GET", "/v1/instances/app").body == before)
        #expect((try c.request("GET", "/v1/instances").json["items"] as? [Any])?.count == 1)

        for path in Self.reads + Self.streams + Self.files + ["/healthz"] {
            #expect(try server.connect().request("GET", path).status == 200, "GET \(path)")
        }
        let health = try c.request("GET", "/healthz").json
        #expect(health["writesNeedToken"] as? Bool == true && health["readsNeedToken"] as? Bool == false, "/healthz tells what needs the token")
        // Whatever answers /metrics, a token is not what stands in its way without --protect-reads.
        #expect(try c.request("GET", "/metrics").status != 401)

        for write in Self.writes {
            let answer = try send(server, write, headers: Self.bearer)
            #expect(answer.status != 401, "\(write.method) \(write.path) with the token: \(answer.status) \(answer.text)")
        }
        #expect(try c.request("GET", "/v1/instances/app").status == 404)
    }

    @Test("--protect-reads: reads, streams and /metrics need the token too; /healthz, the problem pages, the dashboard's files and OPTIONS stay open")
    func protectReads() throws {
        let server = try Self.guardedServer(protectReads: true)
        let c = try server.connect()
        for path in Self.reads + Self.streams + ["/metrics"] {
            Self.expectRefused(try server.connect().request("GET", path), "GET \(path) without a token")
            Self.expectRefused(try server.connect().request("HEAD", path), isHead: true, "HEAD \(path) without a token")
        }
        for path in Self.reads + Self.streams + Self.files {
            #expect(try server.connect().request("GET", path, headers: Self.bearer).status == 200, "GET \(path) with the token")
        }
        #expect(try c.request("GET", "/metrics", headers: Self.bearer).status != 401)
        let health = try c.request("GET", "/healthz")
        #expect(health.status == 200 && health.json["writesNeedToken"] as? Bool == true && health.json["readsNeedToken"] as? Bool == true)
        // Every route the middleware keeps open is one the service answers, without the token.
        for route in Authentication.openRoutes where route != Router.fallbackTemplate {
            let path = route.replacingOccurrences(of: "{kind}", with: ProblemKind.unexpectedEvent.rawValue)
            #expect(try server.connect().request("GET", path).status == 200, "GET \(path) without a token")
        }
        // The page's code loads without the token (it asks for one when the API refuses it).
        for path in Self.files {
            #expect(try server.connect().request("GET", path).status == 200, "GET \(path) without a token")
        }
        #expect(try c.request("OPTIONS", "/v1/instances").status != 401)
        for write in Self.writes {
            Self.expectRefused(try send(server, write), "\(write.method) \(write.path) without a token")
        }
    }

    @Test("the token in the query is taken by streams only, and a stream's query check lets it through")
    func queryToken() throws {
        let server = try Self.guardedServer(protectReads: true)
        let query = "token=\(Self.token)"
        for path in ["/v1/stream?\(query)", "/v1/stream?model=ios-app&\(query)", "/v1/instances/app/stream?\(query)&lastEventId=1"] {
            let answer = try server.connect().request("GET", path)
            #expect(answer.status == 200, "GET \(path): \(answer.status) \(answer.text)")
        }
        Self.expectRefused(try server.connect().request("GET", "/v1/stream?token=wrong"), wrongToken: true, "a stream with a wrong token")

        let c = try server.connect()
        for path in Self.reads {
            let refused = try c.request("GET", "\(path)?\(query)")
            Self.expectRefused(refused, "GET \(path) with the token in the query")
            #expect((refused.json["detail"] as? String)?.contains("query parameter is taken only by streams") == true)
        }
        for write in Self.writes {
            Self.expectRefused(try send(server, (write.method, "\(write.path)?\(query)", write.body)), "\(write.method) \(write.path) with the token in the query")
        }
        // Without --protect-reads a stream still takes the parameter (a dashboard may always send it).
        let open = try Self.guardedServer(protectReads: false)
        #expect(try open.connect().request("GET", "/v1/stream?\(query)").status == 200)
        #expect(try open.connect().request("GET", "/v1/instances/app/stream?\(query)").status == 200)
    }

    @Test("a missing token, another scheme and a wrong token are told apart; the scheme's case does not matter")
    func wrongAndMissing() throws {
        let server = try Self.guardedServer(protectReads: false)
        let write = Self.writes[3]
        Self.expectRefused(try send(server, write), "no Authorization")
        Self.expectRefused(try send(server, write, headers: [("Authorization", "Basic dXNlcjpwYXNz")]), "Basic")
        Self.expectRefused(try send(server, write, headers: [("Authorization", "Bearer")]), "Bearer without a token")
        for wrong in ["wrong", String(Self.token.dropLast()), Self.token + "x", Self.token.uppercased()] {
            Self.expectRefused(try send(server, write, headers: [("Authorization", "Bearer \(wrong)")]), wrongToken: true, "Bearer \(wrong)")
        }
        #expect(try send(server, write, headers: [("Authorization", "bearer \(Self.token)")]).status == 200)
        #expect(try send(server, write, headers: [("Authorization", "BEARER  \(Self.token)")]).status == 200)
    }

    @Test("a write with a body is refused at its head: 401 at once and the connection closed, the body never read")
    func refusedBeforeTheBody() throws {
        let server = try TestServer {
            $0.token = Self.token
            $0.maxBodySize = 1 << 20
        }
        let c = try server.connect()
        try #require(c.send(Array("POST /v1/instances HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n".utf8)))
        let refused = try c.readResponse()
        Self.expectRefused(refused, "a 100000-byte body that never comes")
        #expect(refused.header("connection")?.lowercased() == "close")
        #expect(c.isClosedByPeer())
    }

    @Test("the token is never logged: not from the header, the query of a stream or file, nor a wrong one")
    func tokenIsNotLogged() throws {
        let data = TemporaryDirectory()
        let tokenFile = data.path + "/token"
        try "\(Self.token)\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let server = try LifecycledProcess.serving(
            dataDirectory: data.path + "/data", extra: ["--token-file", tokenFile, "--protect-reads", "--log-level", "debug"]
        )
        // A token file's trailing newline is not part of the token.
        let c = try WireClient(port: server.port)
        #expect(try c.request("PUT", "/v1/instances/app", json: "{}", headers: Self.bearer).status == 201)
        #expect(try c.request("GET", "/v1/instances/app?token=\(Self.token)").status == 401)
        #expect(try c.request("GET", "/v1/instances/app", headers: [("Authorization", "Bearer wrong-guess")]).status == 401)
        #expect(try c.request("GET", "/?token=\(Self.token)").status != 401)
        do {
            let stream = try WireClient(port: server.port)
            #expect(try stream.request("GET", "/v1/instances/app/stream?token=\(Self.token)").status == 200)
        }
        #expect(server.waitForLogLine(containing: ["route=/v1/instances/{id}", "status=401"]) != nil)
        server.signal(SIGTERM)
        let log = server.finish().stderr
        #expect(log.contains("route=/v1/instances/{id}/stream status=200"), "the stream's line is written when it ends")
        #expect(!log.contains(Self.token) && !log.contains("wrong-guess"), "\(log)")
    }

    @Test("a token file that cannot be read, is empty or holds more than a token refuses the start, before the store is opened")
    func tokenFiles() throws {
        let folder = TemporaryDirectory()
        func resolved(_ content: String) throws -> String? {
            let path = folder.path + "/token-\(UUID().uuidString)"
            try content.write(toFile: path, atomically: true, encoding: .utf8)
            var configuration = Configuration()
            configuration.tokenFile = path
            return try configuration.resolvedToken()
        }
        #expect(try resolved("abc\n") == "abc")
        #expect(try resolved("abcd\r\n") == "abcd")
        #expect(try resolved("abcdef") == "abcdef")
        for bad in ["", "\n", "two words\n", "tok\n\n"] {
            #expect(throws: StartError.self, "\(bad.debugDescription)") { try resolved(bad) }
        }
        let holding = folder.path + "/secret"
        try "hidden value\n".write(toFile: holding, atomically: true, encoding: .utf8)
        var configuration = Configuration()
        configuration.tokenFile = holding
        #expect { try configuration.resolvedToken() } throws: { "\($0)".contains(holding) && !"\($0)".contains("hidden value") }

        configuration.tokenFile = folder.path + "/missing"
        configuration.dataDirectory = folder.path + "/data"
        configuration.port = 0
        #expect { try Service(configuration: configuration) } throws: { "\($0)".contains("cannot read the token file \(folder.path)/missing") }
        #expect(!FileManager.default.fileExists(atPath: configuration.dataDirectory))
    }

    @Test("the token options: one source only, --protect-reads needs a token, a refused token is not repeated")
    func options() throws {
        let both = try? Configuration.parse(arguments: ["--token", "a", "--token-file", "/x"], environment: [:])
        #expect(both == nil)
        #expect(throws: Configuration.ParseError.self) { try Configuration.parse(arguments: ["--token-file", "/x"], environment: ["LIFECYCLED_TOKEN": "a"]) }
        #expect(throws: Configuration.ParseError.self) { try Configuration.parse(arguments: ["--protect-reads"], environment: [:]) }
        #expect(throws: Configuration.ParseError.badSecret("--token")) { try Configuration.parse(arguments: ["--token", "has space"], environment: [:]) }
        #expect(throws: Configuration.ParseError.badSecret("LIFECYCLED_TOKEN")) { try Configuration.parse(arguments: [], environment: ["LIFECYCLED_TOKEN": ""]) }
        #expect(!Configuration.ParseError.badSecret("--token").description.contains("has space"))

        let fromEnvironment = try Configuration.parse(arguments: [], environment: ["LIFECYCLED_TOKEN": "t", "LIFECYCLED_PROTECT_READS": "1"])
        #expect(fromEnvironment.token == "t" && fromEnvironment.protectReads)
        let fromFlags = try Configuration.parse(arguments: ["--token-file=/run/secrets/t", "--protect-reads"], environment: [:])
        #expect(fromFlags.tokenFile == "/run/secrets/t" && fromFlags.protectReads && fromFlags.token == nil)
        #expect(try Configuration.parse(arguments: [], environment: [:]).protectReads == false)
    }

    @Test("without a token, a service listening beyond loopback warns that writes are open; on loopback or with a token it does not")
    func openWritesWarning() throws {
        let warning = "writes are open to anyone who can reach the port"
        let data = TemporaryDirectory()
        let open = try LifecycledProcess.serving(dataDirectory: data.path + "/a", extra: ["--host", "0.0.0.0"])
        let line = open.waitForLogLine(containing: [warning])
        #expect(line?.contains("level=warning") == true && line?.contains("address=0.0.0.0:\(open.port)") == true, "\(open.standardErrorSoFar)")
        open.signal(SIGTERM)
        open.finish()

        for extra in [["--host", "0.0.0.0", "--token", Self.token], ["--host", "127.0.0.1"], ["--host", "localhost"]] {
            let quiet = try LifecycledProcess.serving(dataDirectory: data.path + "/b", extra: extra)
            #expect(quiet.waitForLogLine(containing: ["lifecycled started"]) != nil)
            quiet.signal(SIGTERM)
            #expect(!quiet.finish().stderr.contains(warning), "\(extra)")
        }
    }

    @Test("an Idempotency-Key is scoped by client address without a token: another client's same key is a new key")
    func idempotencyByClient() throws {
        let server = try TestServer()
        let key = [("Idempotency-Key", "create-1")]
        let one = try WireClient(port: server.port, source: "127.0.0.1")
        let other = try WireClient(port: server.port, source: "127.0.0.2")
        let first = try one.request("POST", "/v1/instances", json: "{}", headers: key)
        let fromOther = try other.request("POST", "/v1/instances", json: "{}", headers: key)
        #expect(first.status == 201 && fromOther.status == 201)
        #expect(first.json["id"] as? String != nil && fromOther.json["id"] as? String != first.json["id"] as? String)
        let again = try one.request("POST", "/v1/instances", json: "{}", headers: key)
        #expect(again.status == 201 && again.body == first.body)
        // A key reused by the same client on another request is still refused, with the key as sent.
        let reused = try one.request("POST", "/v1/instances", json: #"{"model": "android-activity"}"#, headers: key)
        #expect(reused.status == 422 && reused.json["detail"] as? String == #"Idempotency-Key "create-1" was used for a different request"#)
        #expect((try one.request("GET", "/v1/instances").json["items"] as? [Any])?.count == 2)
    }

    @Test("with a token, an Idempotency-Key is scoped by the token, and what is stored does not hold the token", .sqliteOnly("reads what is stored in the SQLite file"))
    func idempotencyByToken() throws {
        let server = try TestServer { $0.token = Self.token }
        let key = ("Idempotency-Key", "create-1")
        let first = try server.connect().request("POST", "/v1/instances", json: "{}", headers: Self.bearer + [key])
        #expect(first.status == 201)
        // The same token from another address is the same scope.
        let elsewhere = try WireClient(port: server.port, source: "127.0.0.2")
        #expect(try elsewhere.request("POST", "/v1/instances", json: "{}", headers: Self.bearer + [key]).body == first.body)

        server.configuration.token = "another-token"
        try server.restart()
        let otherToken = try server.connect().request("POST", "/v1/instances", json: "{}", headers: [("Authorization", "Bearer another-token"), key])
        #expect(otherToken.status == 201 && otherToken.json["id"] as? String != first.json["id"] as? String)

        server.configuration.token = Self.token
        try server.restart()
        #expect(try server.connect().request("POST", "/v1/instances", json: "{}", headers: Self.bearer + [key]).body == first.body)

        let database = try Database(path: server.dataDirectory + "/" + SQLiteStore.fileName, isReadOnly: true)
        var keys: [String] = []
        try database.prepare("SELECT key FROM idempotency").forEachRow { row in keys.append(row.text(0) ?? "") }
        #expect(keys.count == 2 && keys.allSatisfy { $0.hasPrefix("token:") && $0.hasSuffix(" create-1") && !$0.contains(Self.token) && !$0.contains("another-token") }, "\(keys)")
    }

    @Test("the token comparison: equal only to the token, byte for byte")
    func comparison() {
        let check = Authentication(token: "abc", protectsReads: false)
        #expect(check.isToken("abc"))
        for other in ["", "ab", "abd", "Abc", "abcd", "xbc", "abc "] { #expect(!check.isToken(other[...]), "\(other)") }
    }

    @Test("the Authorization value: Bearer in any case, one or more spaces, then exactly the token; anything else is no token or a wrong one")
    func authorizationValues() {
        let check = Authentication(token: "abc", protectsReads: false)
        func answer(_ authorization: String) -> String {
            let head = Request(method: "POST", path: "/v1/instances", headers: [("authorization", authorization)])
            guard let refusal = check.admit(head) else { return "admitted" }
            return refusal.headers.first { $0.name == "WWW-Authenticate" }?.value ?? "\(refusal.status)"
        }
        let none = "Bearer", wrong = #"Bearer error="invalid_token""#
        for value in ["Bearer abc", "bearer abc", "bEaReR abc", "BEARER    abc"] { #expect(answer(value) == "admitted", "\(value)") }
        for value in ["Bearer abd", "Bearer abc ", "Bearer  ab", "Bearer ", "Bearer   ", "Bearer abcd", "Bearer ABC"] { #expect(answer(value) == wrong, "\(value)") }
        for value in ["", "Bearer", "Bearerabc", "Bearer\tabc", "Bearerx abc", "Beare abc", "Basic abc", "B earer abc", "Bearer-abc"] { #expect(answer(value) == none, "\(value)") }
    }

    @Test("SHA-256 matches the FIPS 180-4 examples, and Python's hashlib at the padding's edges")
    func sha256() {
        func hex(_ text: String) -> String { SHA256.digest(Array(text.utf8)).map { String(format: "%02x", $0) }.joined() }
        #expect(hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(hex(String(repeating: "a", count: 1000)) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
        // One byte short of, exactly at, and past the length that still fits one block.
        #expect(hex(String(repeating: "a", count: 55)) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318")
        #expect(hex(String(repeating: "a", count: 56)) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a")
        #expect(hex(String(repeating: "a", count: 64)) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
        #expect(Authentication.idempotencyScope(of: "t") == Authentication.idempotencyScope(of: "t"))
        #expect(Authentication.idempotencyScope(of: "t") != Authentication.idempotencyScope(of: "u"))
    }
}
