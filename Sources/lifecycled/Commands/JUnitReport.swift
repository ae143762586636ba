import Foundation
import LifecycleClient

/// A check as JUnit XML, the report Jenkins and GitLab read natively and GitHub Actions
/// through the common test-report actions: one `<testsuite>`, one `<testcase>` per instance
/// (or trace), and for one with problems a `<failure>` whose message counts them and whose
/// text lists them, a line each, as `lifecycled check` prints them. A check that could not
/// run is one `<testcase>` with an `<error>` saying why, and a run that made no instance one
/// with a `<failure>`: a report an earlier run left must not stand for this one.
struct JUnitReport {
    let checks: [InstanceCheck]
    /// What stands instead of the checks: a check that found nothing to check (a failure) or
    /// could not run (an error).
    let outcome: Outcome?

    enum Outcome {
        /// No instance carries these labels: a rig that reported nothing.
        case nothingReported(labels: String)
        /// The check did not run: the wait ran out, the service refused or could not be reached.
        case error(String)
    }

    init(checks: [InstanceCheck]) {
        self.checks = checks
        outcome = nil
    }

    init(_ outcome: Outcome) {
        checks = []
        self.outcome = outcome
    }

    var xml: String {
        var (tests, failures, errors) = (checks.count, checks.filter { !$0.isClean }.count, 0)
        var cases = ""
        switch outcome {
        case .nothingReported(let labels)?:
            (tests, failures) = (1, 1)
            let message = Self.escaped("no instance carries \(labels)")
            cases = Self.testcase(#"classname="lifecycle" name="\#(Self.escaped(labels))""#, "failure", message: message, text: message)
        case .error(let reason)?:
            (tests, errors) = (1, 1)
            cases = Self.testcase(#"classname="lifecycle" name="lifecycled check""#, "error", message: Self.escaped(reason), text: Self.escaped(reason))
        case nil:
            break
        }
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="lifecycled check" tests="\(tests)" failures="\(failures)" errors="\(errors)">
              <testsuite name="lifecycled check" tests="\(tests)" failures="\(failures)" errors="\(errors)" skipped="0">

            """ + cases
        for check in checks {
            // classname groups the cases by model in a CI's report, as a test class would.
            let attributes = "classname=\"\(Self.escaped("lifecycle.\(check.model)"))\" name=\"\(Self.escaped(check.instance))\""
            guard !check.isClean else {
                xml += "    <testcase \(attributes)/>\n"
                continue
            }
            let message = "\(Output.counted(check.problems.count, "problem")) in \(Output.counted(check.records, "record"))"
            let text = check.problems.map { Self.escaped($0.description) }.joined(separator: "\n")
            xml += Self.testcase(attributes, "failure", message: Self.escaped(message), text: text)
        }
        return xml + "  </testsuite>\n</testsuites>\n"
    }

    /// A `<testcase>` holding one `<failure>` or `<error>`; `message` and `text` already escaped.
    private static func testcase(_ attributes: String, _ element: String, message: String, text: String) -> String {
        """
            <testcase \(attributes)>
              <\(element) message="\(message)" type="lifecycle">\(text)</\(element)>
            </testcase>

        """
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
