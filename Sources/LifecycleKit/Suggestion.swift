/// The name in `candidates` closest to `name`, when it is close enough to be a likely typo:
/// at most a third of the name's length in edits (at least one), case ignored.
/// Ties go to the earlier candidate, so a suggestion is stable.
public func closestName(to name: String, among candidates: [String]) -> String? {
    let target = Array(name.lowercased().unicodeScalars)
    var best: (name: String, distance: Int)?
    for candidate in candidates {
        let distance = editDistance(target, Array(candidate.lowercased().unicodeScalars))
        if distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
    }
    guard let best, best.distance <= max(1, target.count / 3) else { return nil }
    return best.name
}

/// Levenshtein distance: insertions, deletions and substitutions, one row at a time.
private func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
    if a.isEmpty { return b.count }
    var previous = Array(0...b.count)
    var current = previous
    for i in 1...a.count {
        current[0] = i
        for j in stride(from: 1, through: b.count, by: 1) {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}

/// What an error about an unknown name adds so the caller can correct it without a second
/// look-up: the likely intended name when one is close, then every valid one.
public func suggestion(for name: String, among candidates: [String], kind: String) -> String {
    guard !candidates.isEmpty else { return "there are no \(kind)s" }
    let valid = "valid \(kind)s: \(candidates.joined(separator: ", "))"
    guard let closest = closestName(to: name, among: candidates) else { return valid }
    return "did you mean \"\(closest)\"? \(valid)"
}
