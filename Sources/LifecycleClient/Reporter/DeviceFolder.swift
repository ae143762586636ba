import Foundation

/// What a device asks of the journal's folder, on Apple platforms only. Not verified here: no
/// Apple SDK compiles in this repository's CI, so this file is all the Apple-only code of the
/// reporter, kept small.
enum DeviceFolder {
    /// Excludes `directory` from backups (a restored backup must not clone the queue, or an
    /// instance id kept in it, onto a second device) and gives it, and the files in it, the
    /// protection `completeUntilFirstUserAuthentication`: readable from the first unlock after a
    /// reboot on, so a launch into the background before it is unlocked again can report. Files
    /// made in the folder later take its protection. Failing either costs the property, not the
    /// queue, so a failure is not an error: the journal still works.
    static func prepare(_ directory: URL) {
        #if canImport(Darwin)
        var folder = directory
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        // Best effort by design (above): the folder is usable either way.
        try? folder.setResourceValues(values)
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        for path in [directory.path, directory.appendingPathComponent("journal").path, directory.appendingPathComponent("journal.lock").path]
        where FileManager.default.fileExists(atPath: path) {
            try? FileManager.default.setAttributes([.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: path)
        }
        #endif
        #endif
    }
}
