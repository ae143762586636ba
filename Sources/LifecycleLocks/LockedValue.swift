#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value that one thread at a time reads or changes, behind a `pthread_mutex_t`.
///
/// The codebase's one lock. Synchronization's `Mutex` needs iOS 18 and macOS 15, and
/// `OSAllocatedUnfairLock` iOS 16; a POSIX mutex exists on every platform the package
/// declares (iOS 15, macOS 12, Linux). It is used like `LockedValue`:
/// `counter.withLock { $0 += 1 }`.
public final class LockedValue<Value>: @unchecked Sendable {
    // @unchecked: `value` is only ever touched inside `withLock` or `withLockIfAvailable`, with `mutex` held.
    // Allocated once and never moved: a pthread mutex must stay at the address it was initialized at.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Behind a pointer, not a stored `var`, as Synchronization's `Mutex` keeps its value: the
    // mutex already makes each access exclusive, and a class's `var` would check that again at
    // run time (swift_beginAccess and swift_endAccess, on every hold of every lock).
    private let value: UnsafeMutablePointer<Value>

    /// A lock around `value`, which from now on only the lock's closures see.
    public init(_ value: sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` on the value with the lock held, waiting for it if another thread has it.
    /// Not reentrant: calling `withLock` on the same lock inside `body` deadlocks.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }

    /// Runs `body` on the value if the lock is free right now; nil, without waiting, if another
    /// thread holds it.
    public func withLockIfAvailable<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
