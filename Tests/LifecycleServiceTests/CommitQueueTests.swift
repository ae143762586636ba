import Foundation
import Testing
@testable import LifecycleService
@testable import LifecycleStore

@Suite("Commit queue: the committer's state machine, driven without a thread", .sqliteOnly("a state machine; opens no store"))
struct CommitQueueTests {
    private func job(_ id: String) -> CommitJob {
        CommitJob(write: .delete(id: id, expected: nil), requestID: "", completion: { _ in })
    }

    private func batch(_ action: CommitQueue.NextAction) -> (ids: [String], catchUpFirst: Bool, isMoreWaiting: Bool)? {
        guard case .run(let batch, let catchUpFirst, let isMoreWaiting) = action else { return nil }
        return (batch.map(\.write.instanceID), catchUpFirst, isMoreWaiting)
    }

    @Test("the thread is woken only when it sleeps; writes come out in arrival order, at most a batch at a time")
    func batches() {
        var queue = CommitQueue()
        #expect(queue.submit([job("a")]) == .none, "an awake thread takes it without a wake-up")
        #expect(batch(queue.next(maxBatch: 2)).map { $0.ids == ["a"] && !$0.isMoreWaiting } == true)
        guard case .sleep = queue.next(maxBatch: 2) else {
            Issue.record("an idle committer does not sleep")
            return
        }
        #expect(queue.submit([job("b")]) == .wake)
        #expect(queue.submit([job("c")]) == .none, "one wake-up for however many writes")
        #expect(queue.submit([job("d")]) == .none)
        #expect(batch(queue.next(maxBatch: 2)).map { $0.ids == ["b", "c"] && $0.isMoreWaiting } == true, "d waits behind them")
        #expect(batch(queue.next(maxBatch: 2)).map { $0.ids == ["d"] && !$0.isMoreWaiting } == true)
    }

    @Test("a hint or a poll interval asks for one catch-up, before the next batch")
    func catchUp() {
        var queue = CommitQueue()
        guard case .sleep = queue.next(maxBatch: 8) else {
            Issue.record("an idle committer does not sleep")
            return
        }
        #expect(queue.catchUpHinted() == .wake)
        let first = batch(queue.next(maxBatch: 8))
        #expect(first?.ids == [] && first?.catchUpFirst == true)
        guard case .sleep = queue.next(maxBatch: 8) else {
            Issue.record("caught up, the committer does not sleep")
            return
        }
        queue.pollDue()
        #expect(queue.submit([job("a")]) == .none, "after its poll interval the thread is awake")
        let second = batch(queue.next(maxBatch: 8))
        #expect(second?.ids == ["a"] && second?.catchUpFirst == true)
        #expect(batch(queue.next(maxBatch: 8)) == nil)
    }

    @Test("stopping answers what is queued first, then ends; later writes are refused; only the first stop waits")
    func stopping() {
        var queue = CommitQueue()
        _ = queue.submit([job("a")])
        let stop = queue.stop()
        #expect(!stop.wasStopping)
        #expect(queue.stop().wasStopping)
        #expect(queue.submit([job("b")]) == .refuse)
        #expect(batch(queue.next(maxBatch: 8))?.ids == ["a"])
        guard case .end = queue.next(maxBatch: 8) else {
            Issue.record("a stopping committer with nothing queued does not end")
            return
        }
    }

    @Test("a group (a batch request's items) comes out whole, however large, with nothing of another request inside it")
    func groups() {
        var queue = CommitQueue()
        #expect(queue.submit([job("a")]) == .none)
        #expect(queue.submit(["b1", "b2", "b3"].map(job)) == .none)
        #expect(queue.submit([job("c")]) == .none)
        #expect(queue.submit([]) == .none, "an empty group queues nothing")
        #expect(batch(queue.next(maxBatch: 3))?.ids == ["a"], "the group does not fit beside the write before it, and is not split")
        #expect(batch(queue.next(maxBatch: 2))?.ids == ["b1", "b2", "b3"], "a group larger than a batch goes alone, whole")
        #expect(queue.submit(["d1", "d2"].map(job)) == .none)
        #expect(batch(queue.next(maxBatch: 3))?.ids == ["c", "d1", "d2"], "whole groups share a batch while they fit")
        #expect(batch(queue.next(maxBatch: 3)) == nil)
        _ = queue.stop()
        #expect(queue.submit(["e1", "e2"].map(job)) == .refuse)
    }
}
