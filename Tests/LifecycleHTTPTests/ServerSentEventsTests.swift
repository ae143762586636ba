import Testing
@testable import LifecycleHTTP

@Suite("server-sent event framing")
struct ServerSentEventsTests {
    @Test("an event is id, event and one data line, ended by an empty line")
    func event() {
        let bytes = ServerSentEvents.event(id: 42, type: "record", data: Array(#"{"sequence":42}"#.utf8))
        #expect(String(decoding: bytes, as: UTF8.self) == "id: 42\nevent: record\ndata: {\"sequence\":42}\n\n")
        #expect(String(decoding: ServerSentEvents.event(id: nil, type: nil, data: Array("x".utf8)), as: UTF8.self) == "data: x\n\n")
    }

    @Test("data with a line break, which would end its field early, stops the process: LF, CR, or one at the end")
    func lineBreakInData() async {
        await #expect(processExitsWith: .failure) { _ = ServerSentEvents.event(id: 1, type: nil, data: Array("{\"a\":\n1}".utf8)) }
        await #expect(processExitsWith: .failure) { _ = ServerSentEvents.event(id: 1, type: nil, data: Array("{\"a\":\r1}".utf8)) }
        await #expect(processExitsWith: .failure) { _ = ServerSentEvents.event(id: 1, type: nil, data: Array("{}\n".utf8)) }
        #expect(ServerSentEvents.event(id: 1, type: nil, data: []) == Array("id: 1\ndata: \n\n".utf8))
    }

    @Test("retry and comments")
    func retryAndComment() {
        #expect(String(decoding: ServerSentEvents.retry(milliseconds: 2000), as: UTF8.self) == "retry: 2000\n\n")
        #expect(String(decoding: ServerSentEvents.comment("heartbeat"), as: UTF8.self) == ": heartbeat\n\n")
        #expect(String(decoding: ServerSentEvents.lastEventID(17), as: UTF8.self) == "id: 17\n\n")
    }
}
