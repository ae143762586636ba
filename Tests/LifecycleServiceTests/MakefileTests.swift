import Foundation
import LifecycleTestSupport
import Testing

/// The Makefile's two commands, read as `make -n` prints them (nothing is installed or run):
/// `make run` installs what building and running need and nothing else, and every Python
/// step of `make test` runs in the virtual environment it makes, so that neither needs a
/// pip install into the system's Python (refused by Debian's, PEP 668) (issue 21, item 1).
@Suite("Makefile", .sqliteOnly("reads the Makefile; opens no store"))
struct MakefileTests {

    /// What building and running need: the C libraries' headers and pkg-config.
    static let buildPackages: Set<String> = ["libmicrohttpd-dev", "libsqlite3-dev", "libpq-dev", "libgraphviz-dev", "pkg-config"]

    /// The commands `make -n target` would run, sub-makes included.
    static func dryRun(_ target: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["make", "-n", "--no-print-directory", "-C", repositoryRoot.path, target]
        // Not the settings of a make this runs under (make test): its jobserver, its flags.
        process.environment = ProcessInfo.processInfo.environment.filter { !["MAKEFLAGS", "MFLAGS", "MAKELEVEL"].contains($0.key) }
        let output = PipeCollector()
        process.standardOutput = output.writeEnd
        process.standardError = output.writeEnd
        try process.run()
        try output.writeEnd.close()
        let text = output.finish()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "make -n \(target): \(text)")
        return text
    }

    /// The packages the `apt_install` steps of a dry run check for (`for p in …; do dpkg -s`).
    static func aptPackages(_ commands: String) throws -> Set<String> {
        let pattern = try NSRegularExpression(pattern: #"for p in ([^;]*); do dpkg -s"#)
        var packages: Set<String> = []
        for match in pattern.matches(in: commands, range: NSRange(commands.startIndex..., in: commands)) {
            packages.formUnion(commands[Range(match.range(at: 1), in: commands)!].split(separator: " ").map(String.init))
        }
        return packages
    }

    /// Each Python or pip a dry run starts, with what follows it: the words of each command.
    static func pythonUses(_ commands: String) -> [(program: String, rest: [String])] {
        let words = commands.split(whereSeparator: { " \t\n;|&(){}\\".contains($0) }).map(String.init)
        return words.indices.compactMap { index in
            let name = words[index].split(separator: "/").last.map(String.init) ?? ""
            guard name.range(of: #"^(python|pip)[0-9.]*$"#, options: .regularExpression) != nil else { return nil }
            // `… -m pip`: the Python that runs it is the use.
            if name == "pip", index > 0, words[index - 1] == "-m" { return nil }
            return (words[index], Array(words[(index + 1)...].prefix(2)))
        }
    }

    @Test("make run installs the build's packages and nothing for the tests; it starts no Python and no pip")
    func runInstallsOnlyWhatItNeeds() throws {
        let commands = try Self.dryRun("run")
        #expect(commands.contains("swift build -c release --product lifecycled"))
        #expect(try Self.aptPackages(commands) == Self.buildPackages)
        #expect(Self.pythonUses(commands).isEmpty, "\(Self.pythonUses(commands))")
        #expect(!commands.contains("venv"))
    }

    @Test("make test installs the tests' packages, makes .build/venv with python3 -m venv, and pip and every Python step but the browser test's run its python")
    func testUsesTheVirtualEnvironment() throws {
        let commands = try Self.dryRun("test")
        let packages = try Self.aptPackages(commands)
        #expect(packages.isSuperset(of: Self.buildPackages.union(["postgresql-15", "pgbouncer", "node-eventsource", "python3-venv", "python3-selenium"])))
        let venvPython = ".build/venv/bin/python"
        #expect(commands.contains("python3 -m venv .build/venv"))
        let uses = Self.pythonUses(commands)
        for use in uses {
            let allowed = use.program == venvPython
                || (use.program == "python3" && use.rest == ["-m", "venv"])
                || (use.program == "/usr/bin/python3" && use.rest.first?.hasPrefix("Tests/browser/") == true)
            #expect(allowed, "make test runs \(use.program) \(use.rest.joined(separator: " ")) outside .build/venv")
        }
        // The steps that need the PyPI packages are among them.
        for step in ["-m pip install", "-m openapi_spec_validator openapi.yaml", "Tests/contract/run.py", "Tests/client/run.py"] {
            #expect(commands.contains("\(venvPython) \(step)"), "\(step)")
        }
        // The Swift tests that start a Python (Tests/metrics/parse.py) are told which.
        let makefile = try String(contentsOf: repositoryRoot.appendingPathComponent("Makefile"), encoding: .utf8)
        #expect(makefile.contains("export LIFECYCLED_TEST_PYTHON = $(abspath $(VENV_PYTHON))"))
    }

    @Test("make postgres-test runs the whole service test target on PostgreSQL: no list of suites, so a new suite runs there unless it is marked .sqliteOnly")
    func postgresPassRunsEverySuite() throws {
        let commands = try Self.dryRun("postgres-test")
        let runs = commands.split(separator: "\n").filter { $0.contains("swift test") }
        #expect(runs.count == 1, "\(commands)")
        let run = String(runs.first ?? "")
        #expect(run.contains("LIFECYCLED_TEST_STORE=postgres"), "\(run)")
        #expect(run.hasSuffix("swift test --filter LifecycleServiceTests"), "\(run)")
        #expect(!run.contains("--skip"), "\(run)")
    }
}
