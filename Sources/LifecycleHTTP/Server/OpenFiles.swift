#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open files.
enum OpenFiles {
    /// Raises the soft limit to the hard limit; returns the soft limit now in force.
    static func raiseLimit() -> Int {
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: min(limit.rlim_cur, 1 << 30))
    }
}
