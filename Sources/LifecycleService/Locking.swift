import Foundation

extension NSLock {
    /// `withLock` that keeps the body's typed error.
    func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
