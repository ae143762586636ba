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
/// `counter.withLock { $0 += 1 }`. Copies share one lock and one value, as a class's references do.
public struct LockedValue<Value>: @unchecked Sendable {
    // @unchecked: the value is only ever touched inside `withLock` or `withLockIfAvailable`, with the mutex held.
    // Inlinable, with what it reaches, so that each caller's copy is specialized to its value:
    // unspecialized, each hold looked the storage's generic class up at run time.
    @usableFromInline let storage: Storage

    /// A lock around `value`, which from now on only the lock's closures see.
    @inlinable
    public init(_ value: sending Value) {
        storage = Storage.make(value)
    }

    /// Runs `body` on the value with the lock held, waiting for it if another thread has it.
    /// Not reentrant: calling `withLock` on the same lock inside `body` deadlocks.
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try storage.withUnsafeMutablePointers { (value, mutex) throws(Failure) -> Result in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    /// Runs `body` on the value if the lock is free right now; nil, without waiting, if another
    /// thread holds it.
    @inlinable
    public func withLockIfAvailable<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result? {
        try storage.withUnsafeMutablePointers { (value, mutex) throws(Failure) -> Result? in
            guard pthread_mutex_trylock(mutex) == 0 else { return nil }
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    /// The value and its mutex in one allocation, as swift-nio's `LockStorage` keeps them: a
    /// hold of the lock touches one block rather than an object and two blocks it points to
    /// (the stream writer holds some ten locks a delivery, each of another subscriber's).
    /// Never moved, so the mutex stays at the address it was initialized at. The value is
    /// reached through `withUnsafeMutablePointers`, as Synchronization's `Mutex` keeps its own:
    /// the mutex already makes each access exclusive, and a class's `var` would check that
    /// again at run time (swift_beginAccess and swift_endAccess, on every hold of every lock).
    @usableFromInline
    final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        @inlinable
        static func make(_ value: sending Value) -> Storage {
            let storage = unsafeDowncast(create(minimumCapacity: 1) { _ in value }, to: Storage.self)
            storage.withUnsafeMutablePointerToElements { mutex in
                mutex.initialize(to: pthread_mutex_t())
                let result = pthread_mutex_init(mutex, nil)
                precondition(result == 0, "pthread_mutex_init failed: \(result)")
            }
            return storage
        }

        deinit {
            // ManagedBuffer deinitializes the value; the elements (the mutex) are ours.
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                _ = mutex.deinitialize(count: 1)
            }
        }
    }
}
