import Foundation
import Testing
@testable import LifecycleHTTP

func parse(_ text: String) throws(JSONParseError) -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

@Suite("JSON parser")
struct JSONParserTests {
    @Test("values of every kind")
    func values() throws {
        #expect(try parse(#" {"a": "x", "b": true, "c": false, "d": null, "e": 12, "f": -1.5e2, "g": [1, {"h": []}], "i": {}} "#) == .object([
            "a": .string("x"), "b": .bool(true), "c": .bool(false), "d": .null, "e": .integer(12), "f": .number(-150),
            "g": .array([.integer(1), .object(["h": .array([])])]), "i": .object([:]),
        ]))
        #expect(try parse("0") == .integer(0))
        #expect(try parse("-0.25") == .number(-0.25))
        #expect(try parse("9223372036854775807") == .integer(Int64.max))
        #expect(try parse("9223372036854775808") == .number(9223372036854775808))
        #expect(try parse("1E3") == .number(1000))
    }

    @Test("string escapes, unicode and surrogate pairs")
    func strings() throws {
        #expect(try parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{c}\n\r\t"))
        #expect(try parse(#""\u00e9\u4e2d\ud83e\udd86""#) == .string("é中🦆"))
        #expect(try parse("\"é中🦆\"") == .string("é中🦆"))
    }

    @Test("malformed input is refused with a reason", arguments: [
        "", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a: 1}", "'x'", "tru", "nul", "01", "1.", "-", "1e", ".5", "+1",
        "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud83e\"", "\"\\udd86\"", "\"a\u{1}b\"", "{\"a\": 1} x", "[1 2]", "NaN", "1e999",
        "{\"a\": 1, \"a\": 2}",
    ])
    func malformed(text: String) {
        #expect(throws: JSONParseError.self) { try parse(text) }
    }

    @Test("invalid UTF-8 and deep nesting are refused")
    func hostile() throws {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError(reason: "nesting deeper than 64", offset: 64)) { try parse(deep) }
        #expect((try? parse(String(repeating: "[", count: 60) + String(repeating: "]", count: 60))) != nil)
    }

    @Test("strings are UTF-8 checked whether ASCII or not, escaped or not", arguments: [
        [0xFF], [0x61, 0xC3], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0x61, 0x80, 0x62], [0xF4, 0x90, 0x80, 0x80],
    ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) {
        for body in [[0x22] + bytes + [0x22], Array("\"\\n".utf8) + bytes + [0x22]] {
            #expect(throws: JSONParseError(reason: "string is not valid UTF-8", offset: body.count)) { try JSONParser.parse(body) }
        }
    }

    @Test("ASCII and multi-byte strings come back as they were sent, escaped or not")
    func validUTF8() throws {
        for text in ["plain", "", "café", "🦆 duck", "mixed é🦆 and \n escaped"] {
            var buffer = JSONBuffer()
            buffer.string(text)
            #expect(try JSONParser.parse(buffer.bytes) == .string(text))
        }
    }
}

struct Sample: Encodable {
    var name: String
    var count: Int
    var ratio: Double
    var flag: Bool
    var missing: String?
    var present: String?
    var list: [Int]
    var nested: Inner
    var map: [String: Int]
    var when: Date

    struct Inner: Encodable {
        var text: String
        var empty: [String]
    }
}

/// Encodes two containers onto one value, as ModelView.Row does.
struct Merged: Encodable {
    enum Keys: String, CodingKey { case id }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode("r1", forKey: .id)
        try Sample.Inner(text: "t", empty: []).encode(to: encoder)
    }
}

/// `JSON.encode`'s text without the newline that ends every body, which it requires.
private func encodedText<T: Encodable>(_ value: T) throws -> String {
    let bytes = try JSON.encode(value)
    try #require(bytes.last == JSON.newline)
    return String(decoding: bytes.dropLast(), as: UTF8.self)
}

@Suite("JSON encoder")
struct JSONEncoderTests {
    @Test("layout: declaration order, sorted dictionaries, nulls omitted by encodeIfPresent, ISO dates")
    func layout() throws {
        let sample = Sample(
            name: "a\"b\\c\nd\u{1}é", count: -3, ratio: 0.5, flag: true, missing: nil, present: "p", list: [1, 2, 3],
            nested: .init(text: "x", empty: []), map: ["zeta": 1, "alpha": 2, "mid": 3], when: Date(timeIntervalSince1970: 1_700_000_000.123)
        )
        let text = try encodedText(sample)
        #expect(text == #"{"name":"a\"b\\c\nd\u0001é","count":-3,"ratio":0.5,"flag":true,"present":"p","list":[1,2,3],"nested":{"text":"x","empty":[]},"map":{"alpha":2,"mid":3,"zeta":1},"when":"2023-11-14T22:13:20.123Z"}"#)
        // And it is what Foundation reads back.
        let back = try JSONSerialization.jsonObject(with: Data(try JSON.encode(sample))) as? [String: Any]
        #expect(back?["name"] as? String == sample.name)
    }

    @Test("two containers asked for by one value merge into one object")
    func merged() throws {
        #expect(try encodedText(Merged()) == #"{"id":"r1","text":"t","empty":[]}"#)
        #expect(try encodedText([Merged(), Merged()]) == #"[{"id":"r1","text":"t","empty":[]},{"id":"r1","text":"t","empty":[]}]"#)
    }

    @Test("numbers and non-finite values")
    func numbers() throws {
        #expect(try encodedText([1.0, 2.5, -0.125, 1e20]) == "[1,2.5,-0.125,1e+20]")
        #expect(throws: EncodingError.self) { try JSON.encode([Double.nan]) }
    }

    /// Every standard number type, alone, in arrays and as members: each once recursed
    /// forever (`JSON.encode([UInt32(1), 2])` crashed the process).
    @Test("every standard number type, as a value, in an array and as a member")
    func everyNumberType() throws {
        func text<T: Encodable>(_ value: T) throws -> String { try encodedText(value) }
        #expect(try text([UInt32(1), 2]) == "[1,2]")
        #expect(try text(UInt64.max) == "18446744073709551615")
        #expect(try text([UInt64.max]) == "[18446744073709551615]")
        #expect(try text(Int8.min) == "-128")
        #expect(try text([Int16(-3), 4]) == "[-3,4]")
        #expect(try text([Int32.min]) == "[-2147483648]")
        #expect(try text([UInt8(255)]) == "[255]")
        #expect(try text([UInt16.max]) == "[65535]")
        #expect(try text([UInt(7)]) == "[7]")
        #expect(try text(Float(1.5)) == "1.5")
        #expect(try text([Float(0.25), 3]) == "[0.25,3]")
        #expect(try text(Float16(2.5)) == "2.5")
        #expect(try text([Decimal(string: "12345678901234567890.125")!]) == "[12345678901234567890.125]")
        #expect(try text(["b": UInt32(2), "a": UInt32(1)]) == #"{"a":1,"b":2}"#)
        #expect(try text(Data([1, 2])) == "[1,2]")
        #expect(throws: EncodingError.self) { try JSON.encode([Float.infinity]) }
        #expect(throws: EncodingError.self) { try JSON.encode(Decimal.nan) }
    }

    @Test("a problem carries its members and extensions")
    func problem() throws {
        let problem = Problem(status: 409, title: "Conflict", detail: "d", extensions: ["record": JSONFragment(["k": 1])])
        #expect(String(decoding: Response.problem(problem).body.bytes ?? [], as: UTF8.self) == #"{"type":"/problems/conflict","title":"Conflict","status":409,"detail":"d","record":{"k":1}}"# + "\n")
    }

    @Test("a problem's body escapes its text, writes extensions by name and takes a member of JSON as it is")
    func problemBody() throws {
        let problem = Problem(
            status: 422, title: "Unprocessable \"Content\"", detail: "\"x\" \\ \u{1}\n é",
            extensions: ["b": JSONFragment(2), "a": JSONFragment("s\""), "c": JSONFragment(true)]
        )
        let type = ProblemTypes.uri(forStatus: 422)
        #expect(String(decoding: problem.json, as: UTF8.self)
            == #"{"type":"\#(type)","title":"Unprocessable \"Content\"","status":422,"detail":"\"x\" \\ \u0001\n é","a":"s\"","b":2,"c":true}"# + "\n")
        let record = Array(#"{"k":[1,"é"],"s":"\""}"#.utf8)
        let carrying = Problem(status: 409, title: "Conflict", detail: "d").json(adding: "record", json: record)
        #expect(String(decoding: carrying, as: UTF8.self) == #"{"type":"/problems/conflict","title":"Conflict","status":409,"detail":"d","record":{"k":[1,"é"],"s":"\""}}"# + "\n")
        // Both read back as the members they were made of.
        guard case .object(let members) = try JSONParser.parse(problem.json), case .object(let carried) = try JSONParser.parse(carrying) else {
            Issue.record("a problem's body is no JSON object")
            return
        }
        #expect(members["detail"] == .string("\"x\" \\ \u{1}\n é") && members["title"] == .string("Unprocessable \"Content\""))
        #expect(carried["record"] == (try JSONParser.parse(record)))
    }
}

@Suite("JSON buffer and media type, as the write path uses them")
struct WritePathBytesTests {
    @Test("integers are written as String(value) writes them, at the extremes too")
    func integers() {
        let values: [Int64] = [0, 7, -7, 10, -10, 1_000_000, Int64.max, Int64.min, Int64.min + 1]
        for value in values {
            var json = JSONBuffer(capacity: 0)
            json.integer(value)
            json.integer(Int(value))
            json.integer(Int32(truncatingIfNeeded: value))
            #expect(json.bytes == Array((String(value) + String(value) + String(Int32(truncatingIfNeeded: value))).utf8))
        }
        var big = JSONBuffer(capacity: 0)
        big.integer(UInt64.max)
        #expect(big.bytes == Array("18446744073709551615".utf8))
    }

    @Test("the media type drops its parameters, HTTP's spaces and tabs around it and its case")
    func mediaType() {
        func type(_ value: String?) -> String? {
            Request(method: "POST", path: "/", headers: value.map { [(name: "content-type", value: $0)] } ?? []).mediaType
        }
        #expect(type("application/json") == "application/json")
        #expect(type("Application/JSON; charset=utf-8") == "application/json")
        #expect(type(" \tapplication/json \t; charset=utf-8") == "application/json")
        #expect(type("application/json;") == "application/json")
        #expect(type("; charset=utf-8") == "")
        #expect(type("   ") == "")
        #expect(type("") == "")
        #expect(type("text/plain ; q=1") == "text/plain")
        #expect(type("é/ü ") == "é/ü")
        #expect(type(nil) == nil)
    }
}
