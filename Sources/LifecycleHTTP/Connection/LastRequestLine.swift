#if canImport(Glibc)
import Glibc
#endif

/// The connection whose request line this daemon thread parsed last (a pthread key's
/// value per thread, unretained: cleared when that connection closes, on this thread).
/// libmicrohttpd checks a header block in the same pass that parsed its request line,
/// unless the block arrived later, so a refusal of it it logs concerns this connection.
enum LastRequestLine {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    static func set(_ context: ConnectionContext) {
        pthread_setspecific(key, Unmanaged.passUnretained(context).toOpaque())
    }

    static var context: ConnectionContext? {
        pthread_getspecific(key).map { Unmanaged<ConnectionContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Forgets `context` if it is the one kept.
    static func forget(_ context: ConnectionContext) {
        if pthread_getspecific(key) == Unmanaged.passUnretained(context).toOpaque() { pthread_setspecific(key, nil) }
    }
}
