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
            let attributes = "classname=\"\(Self.escaped("lifecycle.\(check.model)"))\" name=\"\(Self.escaped(check.instance))\""
            guard !check.isClean else {
                xml += "    <testcase \(attributes)/>\n"
                continue
            }
            let message = "\(Output.counted(check.problems.count, "problem")) in \(Output.counted(check.records, "record"))"
            let text = check.problems.map { Self.escaped($0.description) }.joined(separator: "\n")
            xml += """
                    <testcase \(attributes)>
                      <failure message="\(Self.escaped(message))" type="lifecycle">\(text)</failure>
                    </testcase>

                """
        }
        return xml + "  </testsuite>\n</testsuites>\n"
    }

    /// One line of text as XML character data or an attribute value: made readable first as on
    /// standard output (``Readable``: every control character, which XML 1.0 cannot hold or an
    /// attribute would read back as a space, becomes an escape such as `\u{1B}`), then the
    /// markup characters as entities, and the two noncharacters XML forbids (U+FFFE, U+FFFF)
    /// escaped as well, so that what a device sent cannot make the report unreadable.
    static func escaped(_ line: String) -> String {
        var escaped = ""
        for scalar in Readable.escaped(line).unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\u{FFFE}", "\u{FFFF}": escaped += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
