import Foundation

/// Why a command line was refused: printed as one line, exit 2 (as the service's own flags).
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Why a command failed for a reason of its own (not the service's): exit 1.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// What a command's options are: flags that take a value (`--queue DIR`, `--queue=DIR`,
/// repeatable where the command allows it), switches (`--json`), and positional arguments.
/// `--` ends the options, so an instance id may start with `-`.
struct Arguments {
    private(set) var values: [String: [String]] = [:]
    private(set) var switches: Set<String> = []
    private(set) var positional: [String] = []

    /// Reads `arguments` against the flags a command knows. Throws `helpRequested` for `--help`/`-h`.
    init(_ arguments: [String], command: String, valued: Set<String>, switches known: Set<String>) throws(ParseOutcome) {
        var remaining = arguments[...]
        var optionsEnded = false
        while let argument = remaining.popFirst() {
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                positional.append(argument)
                continue
            }
            if argument == "--" { optionsEnded = true; continue }
            if argument == "--help" || argument == "-h" { throw .helpRequested }
            var flag = argument
            var value: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                flag = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            if known.contains(flag) {
                guard value == nil else { throw .usage(UsageError("option \(flag) takes no value; see lifecycled \(command) --help")) }
                switches.insert(flag)
            } else if valued.contains(flag) {
                guard let given = value ?? remaining.popFirst() else {
                    throw .usage(UsageError("option \(flag) needs a value; see lifecycled \(command) --help"))
                }
                values[flag, default: []].append(given)
            } else {
                throw .usage(UsageError("unknown option \(argument) for lifecycled \(command); see lifecycled \(command) --help"))
            }
        }
    }

    /// The value of a flag given at most once.
    func single(_ flag: String, command: String) throws(UsageError) -> String? {
        guard let given = values[flag] else { return nil }
        guard given.count == 1 else { throw UsageError("option \(flag) given \(given.count) times; see lifecycled \(command) --help") }
        return given[0]
    }

    /// Every value of a repeatable flag, in order (none: empty).
    func all(_ flag: String) -> [String] { values[flag] ?? [] }

    func has(_ flag: String) -> Bool { switches.contains(flag) }

    /// How reading a command line ended, when not with options to run.
    enum ParseOutcome: Error {
        case helpRequested
        case usage(UsageError)
    }
}

/// Where the service is and the token to send: `--server`/`LIFECYCLED_SERVER` (default
/// `http://127.0.0.1:8080`) and `--token`/`LIFECYCLED_TOKEN` (the same variable the service
/// reads its own token from, so a script on the service's host needs no flag).
struct ServerOptions {
    static let defaultServer = "http://127.0.0.1:8080"
    /// The flags every client command takes.
    static let flags: Set<String> = ["--server", "--token"]
    /// Their lines in each command's `--help`.
    static let help = """
          --server URL        the service [LIFECYCLED_SERVER, default \(defaultServer)]
          --token TOKEN       the bearer token writes need [LIFECYCLED_TOKEN]; prefer the
                              variable, as flags show in ps
          --help              this text
        """

    var server: URL
    var token: String?

    init(_ arguments: Arguments, environment: [String: String], command: String) throws(UsageError) {
        let text = try arguments.single("--server", command: command) ?? environment["LIFECYCLED_SERVER"] ?? Self.defaultServer
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw UsageError("invalid value \"\(text)\" for --server (LIFECYCLED_SERVER): an http:// or https:// URL; see lifecycled \(command) --help")
        }
        server = url
        let token = try arguments.single("--token", command: command) ?? environment["LIFECYCLED_TOKEN"]
        if let token, !((1...4096).contains(token.utf8.count) && token.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E })) {
            throw UsageError("invalid value for --token (LIFECYCLED_TOKEN) (not shown): a token is 1 to 4096 visible ASCII characters without spaces")
        }
        self.token = token
    }
}
