import Dispatch
import Testing
import LifecycleLocks

@Suite("LockedValue")
struct LockedValueTests {
    private enum Failure: Error { case refused }

    /// Counts its own end, to show the lock lets go of its value.
    private final class Tracked: Sendable {
        let ended: LockedValue<Bool>
        init(ended: LockedValue<Bool>) { self.ended = ended }
        deinit { ended.withLock { $0 = true } }
    }

    @Test("increments from many threads at once all count")
    func concurrentIncrements() {
        let counter = LockedValue(0)
        // Read-modify-write in two steps inside the lock: without mutual exclusion, threads
        // interleaving between the read and the write lose increments.
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20_000 {
                counter.withLock { value in
                    let read = value
                    value = read + 1
                }
            }
        }
        #expect(counter.withLock { $0 } == 160_000)
    }

    @Test("copies share one lock and one value, as references to one object did")
    func copiesShare() {
        let original = LockedValue(0)
        let copy = original
        copy.withLock { $0 += 1 }
        #expect(original.withLock { $0 } == 1)
        // One lock: while a copy holds it, the original is not free.
        copy.withLock { _ in #expect(original.withLockIfAvailable { $0 } == nil) }
    }

    @Test("withLock returns the closure's result and keeps its changes")
    func resultAndChanges() {
        let list = LockedValue<[String]>([])
        let count = list.withLock { value in
            value.append("a")
            value.append("b")
            return value.count
        }
        #expect(count == 2)
        #expect(list.withLock { $0 } == ["a", "b"])
    }

    @Test("a typed error passes through and the lock is free afterwards")
    func throwingReleases() {
        let value = LockedValue(1)
        #expect(throws: Failure.refused) {
            try value.withLock { (v: inout Int) throws(Failure) in
                v = 2
                throw Failure.refused
            }
        }
        #expect(value.withLockIfAvailable { $0 } == 2)
    }

    @Test("withLockIfAvailable gives nil while another thread holds the lock, the value once free")
    func ifAvailable() {
        let value = LockedValue(7)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            value.withLock { _ in
                held.signal()
                release.wait()
            }
            done.signal()
        }
        held.wait()
        #expect(value.withLockIfAvailable { $0 } == nil)
        release.signal()
        done.wait()
        #expect(value.withLockIfAvailable { $0 } == 7)
    }

    @Test("the lock releases its value when it ends")
    func releasesValue() {
        let ended = LockedValue(false)
        do {
            let lock = LockedValue(Tracked(ended: ended))
            #expect(lock.withLock { !$0.ended.withLock { $0 } })
        }
        #expect(ended.withLock { $0 })
    }
}

