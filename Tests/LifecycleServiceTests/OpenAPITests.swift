import Foundation
import Testing
@testable import LifecycleService

@Suite("openapi.yaml")
struct OpenAPITests {
    /// (method, path) pairs under `paths:`; the file's layout is two-space YAML.
    static func documentedOperations() throws -> Set<String> {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        var operations: Set<String> = []
        var inPaths = false
        var path: String?
        for line in text.components(separatedBy: "\n") {
            if line == "paths:" { inPaths = true; continue }
            if inPaths, !line.isEmpty, !line.hasPrefix(" ") { break }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if let path, let method = ["get", "post", "put", "delete", "patch"].first(where: { line == "    \($0):" }) {
                operations.insert("\(method.uppercased()) \(path)")
            }
        }
        return operations
    }

    @Test("every route is documented and every documented operation is routed")
    func routesMatch() throws {
        let server = try TestServer(.router)
        let router = API(registry: server.service!.registry, staticFiles: nil, metrics: server.service!.metrics).makeRouter()
        let routed = Set(router.routeList.map { "\($0.method.rawValue) \($0.pattern)" })
        let documented = try Self.documentedOperations()
        #expect(routed.count == 26)
        #expect(routed == documented)
    }
}
