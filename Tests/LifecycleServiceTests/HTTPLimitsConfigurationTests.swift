import Testing
@testable import LifecycleService

@Suite("HTTP limit flags", .sqliteOnly("parses flags; opens no store"))
struct HTTPLimitsConfigurationTests {
    @Test("connection limits and the request timeout, from flags or the environment, with safe defaults")
    func limits() throws {
        let defaults = try Configuration.parse(arguments: [], environment: [:])
        #expect(defaults.maxConnections == nil && defaults.maxConnectionsPerClient == 256 && defaults.requestTimeout == 30)

        let flags = try Configuration.parse(
            arguments: ["--max-connections", "500", "--max-connections-per-client=20", "--request-timeout", "5"],
            environment: ["LIFECYCLED_MAX_CONNECTIONS_PER_CLIENT": "7", "LIFECYCLED_REQUEST_TIMEOUT": "9"]
        )
        #expect(flags.maxConnections == 500 && flags.maxConnectionsPerClient == 20 && flags.requestTimeout == 5)

        let environment = try Configuration.parse(arguments: [], environment: ["LIFECYCLED_MAX_CONNECTIONS": "64", "LIFECYCLED_REQUEST_TIMEOUT": "9"])
        #expect(environment.maxConnections == 64 && environment.requestTimeout == 9)

        for (flag, value) in [("--max-connections", "0"), ("--max-connections-per-client", "-1"), ("--request-timeout", "0"), ("--request-timeout", "1.5")] {
            #expect(throws: Configuration.ParseError.badValue(flag, value)) { try Configuration.parse(arguments: [flag, value], environment: [:]) }
        }
        #expect(Configuration.usage.contains("--max-connections-per-client N  open connections from one client address"))
    }
}
