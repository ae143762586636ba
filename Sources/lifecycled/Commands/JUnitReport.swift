import Foundation
import LifecycleClient

/// A check as JUnit XML, the report Jenkins and GitLab read natively and GitHub Actions
/// through the common test-report actions: one `<testsuite>`, one `<testcase>` per instance
/// (or trace), and for one with problems a `<failure>` whose message counts them and whose
/// text lists them, a line each, as `lifecycled check` prints them.
struct JUnitReport {
    let checks: [InstanceCheck]

    var xml: String {
        let failures = checks.filter { !$0.isClean }.count
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="lifecycled check" tests="\(checks.count)" failures="\(failures)" errors="0">
              <testsuite name="lifecycled check" tests="\(checks.count)" failures="\(failures)" errors="0" skipped="0">

            """
        for check in checks {
            // classname groups the cases by model in a CI's report, as a test class would.
            let attributes = "classname=\"\(Self.escaped("lifecycle.\(check.model)", attribute: true))\" name=\"\(Self.escaped(check.instance, attribute: true))\""
            guard !check.isClean else {
                xml += "    <testcase \(attributes)/>\n"
                continue
            }
            let message = "\(Output.counted(check.problems.count, "problem")) in \(Output.counted(check.records, "record"))"
            let text = check.problems.map(\.description).joined(separator: "\n")
            xml += """
                    <testcase \(attributes)>
                      <failure message="\(Self.escaped(message, attribute: true))" type="lifecycle">\(Self.escaped(text, attribute: false))</failure>
                    </testcase>

                """
        }
        return xml + "  </testsuite>\n</testsuites>\n"
    }

    /// `text` as XML character data or an attribute value: the five markup characters as
    /// entities, and the characters XML 1.0 cannot hold at all (C0 controls but tab, line feed
    /// and carriage return; U+FFFE, U+FFFF) as `\u{1B}`, so what a device sent cannot make the
    /// report unreadable. In an `attribute` a line feed, a carriage return or a tab would be read
    /// back as a space: they are character references there.
    static func escaped(_ text: String, attribute: Bool) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\n", "\r", "\t": escaped += attribute ? "&#\(scalar.value);" : String(scalar)
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF:
                escaped += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
