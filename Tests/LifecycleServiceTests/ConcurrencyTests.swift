import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService

/// What one client saw: the version and sequence of each acknowledged record.
struct Acknowledged: Hashable {
    var instance: String
    var version: Int
    var sequence: Int
}

/// Starts `count` threads, each running `body` with its index and its own keep-alive
/// connection; the group is left as each returns (or fails to connect).
func startClients(_ count: Int, port: UInt16, _ body: @escaping @Sendable (Int, WireClient) -> Void) -> DispatchGroup {
    let group = DispatchGroup()
    for client in 0..<count {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            guard let connection = try? WireClient(port: port) else { return }
            body(client, connection)
        }
    }
    return group
}

/// Runs `clients` threads to completion and collects what each acknowledged.
func runClients(_ clients: Int, port: UInt16, _ body: @escaping @Sendable (Int, WireClient) throws -> [Acknowledged]) -> [[Acknowledged]] {
    let results = LockedValue<[Int: [Acknowledged]]>([:])
    let errors = LockedValue<[String]>([])
    startClients(clients, port: port) { client, connection in
        do {
            let acknowledged = try body(client, connection)
            results.withLock { $0[client] = acknowledged }
        } catch {
            errors.withLock { $0.append("client \(client): \(error)") }
        }
    }.wait()
    #expect(errors.withLock { $0 } == [])
    return results.withLock { r in (0..<clients).map { r[$0] ?? [] } }
}

@Suite("concurrency")
struct ConcurrencyTests {
    static let clients = 8
    static let eventsPerClient = 500

    /// Alternates two events that are always valid in foreground.
    static func post(_ c: WireClient, _ id: String, _ i: Int) throws -> Acknowledged {
        let event = i % 2 == 0 ? "willResignActive" : "didBecomeActive"
        let response = try c.event(id, #"{"event": "\#(event)"}"#)
        guard response.status == 200, let version = response.json["version"] as? Int, let sequence = response.json["sequence"] as? Int else {
            throw HTTPClientError(description: "event refused: \(response.status) \(response.text)")
        }
        return Acknowledged(instance: id, version: version, sequence: sequence)
    }

    /// Versions contiguous from `first`, sequences unique, and history holding exactly the acknowledged records.
    static func verify(_ c: WireClient, _ id: String, acknowledged: [Acknowledged], setupRecords: Int) throws {
        let versions = acknowledged.map(\.version).sorted()
        #expect(versions == Array((setupRecords + 1)...(setupRecords + acknowledged.count)), "no lost or duplicated versions of \(id)")
        let history = try c.fullHistory(id)
        #expect(history.count == setupRecords + acknowledged.count)
        let historyVersions = history.compactMap { $0["version"] as? Int }
        #expect(historyVersions == Array(1...(setupRecords + acknowledged.count)))
        let historySequences = history.compactMap { $0["sequence"] as? Int }
        #expect(historySequences == historySequences.sorted() && Set(historySequences).count == historySequences.count)
        let bySequence = Dictionary(uniqueKeysWithValues: history.map { ($0["sequence"] as! Int, $0["version"] as! Int) })
        for ack in acknowledged { #expect(bySequence[ack.sequence] == ack.version) }
    }

    @Test("8 clients x 500 events over 8 instances: nothing lost or duplicated")
    func spreadOverInstances() throws {
        let server = try TestServer()
        let setup = try server.connect()
        for client in 0..<Self.clients { try setup.makeInstance("spread-\(client)", events: coldStart) }
        let results = runClients(Self.clients, port: server.port) { client, c in
            try (0..<Self.eventsPerClient).map { try Self.post(c, "spread-\(client)", $0) }
        }
        let all = results.flatMap { $0 }
        #expect(all.count == Self.clients * Self.eventsPerClient)
        #expect(Set(all.map(\.sequence)).count == all.count, "sequence numbers are unique")
        for client in 0..<Self.clients {
            #expect(results[client].map(\.version) == Array(4...(3 + Self.eventsPerClient)))
            try Self.verify(setup, "spread-\(client)", acknowledged: results[client], setupRecords: 3)
        }
    }

    @Test("8 clients x 500 events on one instance: versions strictly increase, nothing lost")
    func allOnOneInstance() throws {
        let server = try TestServer()
        let setup = try server.connect()
        try setup.makeInstance("shared", events: coldStart)
        let results = runClients(Self.clients, port: server.port) { _, c in
            try (0..<Self.eventsPerClient).map { try Self.post(c, "shared", $0) }
        }
        for client in results {
            #expect(client.count == Self.eventsPerClient)
            #expect(zip(client, client.dropFirst()).allSatisfy { $0.version < $1.version && $0.sequence < $1.sequence }, "each client sees its records in order")
        }
        let all = results.flatMap { $0 }
        try Self.verify(setup, "shared", acknowledged: all, setupRecords: 3)
        #expect(try setup.request("GET", "/v1/instances/shared").json["version"] as? Int == 3 + Self.clients * Self.eventsPerClient)
    }
}
