import LifecycleHTTP

/// The names a request may call the service by (its `Host`), against DNS rebinding: a page
/// whose own name its site points at 127.0.0.1 reaches a service on loopback as its own
/// origin, so the browser lets it read and write there; only the `Host` it sends still names
/// that site. Such a request is refused with 421 on its head.
///
/// An IP address, `localhost` and names under `.localhost` (which browsers resolve to
/// loopback themselves) are always fine, since a page cannot have a rebound name sent as
/// one; so are the names given with `--allowed-host`. The middleware runs when the service
/// listens on loopback, or when `--allowed-host` names some (see ``Configuration/allowedHostNames``).
struct AllowedHosts: Middleware {
    /// Lowercased names, without ports.
    let names: Set<String>

    func isAllowed(_ host: HostName) -> Bool {
        host.isAddress || host.name.isEmpty || host.name == "localhost" || host.name.hasSuffix(".localhost") || names.contains(host.name)
    }

    func admit(_ head: Request) -> Response? {
        // The server has refused a missing (HTTP/1.1) or malformed `Host` already; an
        // HTTP/1.0 request without one names no host, so no rebound name either.
        guard let host = head.hostName, !isAllowed(host) else { return nil }
        // host-not-allowed
        return .problem(Problem(
            status: 421, title: "Misdirected Request",
            detail: "this service does not answer to the name \(host.name); call it by localhost, by an IP address, or by a name given with --allowed-host"
        ))
    }
}
