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

    @Test("the batch body limit, from the flag or the environment, 2 MiB by default and apart from --max-body")
    func batchBody() throws {
        let defaults = try Configuration.parse(arguments: [], environment: [:])
        #expect(defaults.maxBatchBodySize == 2 * 1024 * 1024 && defaults.maxBodySize == 64 * 1024)
        let flag = try Configuration.parse(arguments: ["--max-batch-body", "500000"], environment: ["LIFECYCLED_MAX_BATCH_BODY": "7"])
        #expect(flag.maxBatchBodySize == 500_000 && flag.maxBodySize == 64 * 1024)
        #expect(try Configuration.parse(arguments: [], environment: ["LIFECYCLED_MAX_BATCH_BODY": "4096"]).maxBatchBodySize == 4096)
        #expect(throws: Configuration.ParseError.badValue("--max-batch-body", "0")) { try Configuration.parse(arguments: ["--max-batch-body", "0"], environment: [:]) }
        #expect(Configuration.usage.contains("--max-batch-body BYTES"))
    }
}
