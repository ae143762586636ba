extension Array where Element == InstanceCheck {
    /// The problems found, as `lifecycled check` prints them: a summary line (`3 problems in 2
    /// of 5 instances`), then one line per problem, prefixed with its instance; nil when every
    /// check is clean.
    public var problemReport: String? {
        let failed = filter { !$0.isClean }
        guard !failed.isEmpty else { return nil }
        let problems = failed.reduce(0) { $0 + $1.problems.count }
        let summary = "\(Self.counted(problems, "problem")) in \(failed.count) of \(Self.counted(count, "instance"))"
        return ([summary] + failed.flatMap(\.problemLines)).joined(separator: "\n")
    }

    /// `1 problem`, `2 problems`.
    static func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
}
