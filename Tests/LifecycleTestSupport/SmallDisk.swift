import Foundation

#if canImport(Glibc)
import Glibc

/// A small tmpfs mounted on a folder of its own, unmounted when the value is dropped: a disk
/// that fills for real (ENOSPC from the kernel, not from a stand-in). Mounting needs root,
/// which the tests and CI run as.
public final class SmallDisk {
    /// The mounted folder.
    public let path: String
    private let folder = TemporaryDirectory()
    private var filler: String { path + "/filler" }

    /// Mounts a tmpfs of `kilobytes`.
    public init(kilobytes: Int = 1024) throws {
        path = folder.path
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(kilobytes)k,mode=0755") == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM)
        }
    }

    deinit {
        // Lazily: a process a test started may still hold a file on it.
        umount2(path, Int32(MNT_DETACH))
    }

    /// The kernel's page: tmpfs gives a file its space a page at a time, so a file's last page
    /// has room left after the disk is full.
    public static var pageSize: Int { Int(sysconf(Int32(_SC_PAGESIZE))) }

    /// Fills every free page with a file of its own: after it, a write that needs a new page fails with ENOSPC.
    public func fill() throws {
        let descriptor = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0, count: 1 << 16)
        var size = chunk.count
        while size > 0 {
            let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, size) }
            if written < 0 {
                guard errno == ENOSPC else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                size /= 2
            }
        }
    }

    /// Removes what ``fill()`` wrote: the disk has room again.
    public func free() throws {
        try FileManager.default.removeItem(atPath: filler)
    }

    /// Hook names (each 1 to 128 characters, as the service allows) whose JSON array,
    /// `["p…","p…"]`, is `bytes` long (at least 5, the length of `["p"]`): what pads a queued
    /// item to a size.
    public static func hooks(jsonBytes bytes: Int) -> [String] {
        // k names cost 1 + 3k bytes beside their characters: brackets, quotes, commas.
        let count = max(1, (bytes - 1 + 130) / 131)
        let characters = bytes - 1 - 3 * count
        return (0..<count).map { String(repeating: "p", count: characters / count + ($0 < characters % count ? 1 : 0)) }
    }

    /// Hook names that, in place of `["p"]` in an entry that would end a file at `end`, end it
    /// `short` bytes before a page's end: how a test makes a write need a page the full disk
    /// has not got (or may have, `short` bytes of it).
    public static func hooks(endingAPage end: Int, short: Int = 0) -> [String] {
        hooks(jsonBytes: 5 + ((pageSize - short - end % pageSize) % pageSize + pageSize) % pageSize)
    }

    /// The size of the file at `path`, in bytes.
    public static func size(of path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? -1
    }
}
#endif
