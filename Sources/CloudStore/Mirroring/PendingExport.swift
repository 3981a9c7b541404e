import Foundation

/// What this device still has to upload for one object, folded from its local history.
///
/// Folding rules, applied change by change: an insert uploads the whole object; updates upload the
/// union of their changed keys; a delete uploads a delete if the server has the object and nothing
/// otherwise (insert then delete never leaves the device); an insert after a delete (the same id
/// re-created) uploads the whole object again, so it is not lost.
enum PendingExport: Hashable, Sendable, Codable {
    /// Upload the object: all of it when `full`, otherwise the keys, each with when it changed.
    case save(full: Bool, keys: [String: Date])
    /// Delete the object's record.
    case delete

    /// One local change to an object.
    enum Change: Hashable, Sendable {
        case insert(keys: Set<String>)
        case update(keys: Set<String>)
        case delete
    }

    /// The pending export after one more local change.
    ///
    /// - Parameters:
    ///   - pending: what was pending before.
    ///   - isOnServer: whether the server has a copy of the object (it was uploaded or imported).
    static func folding(_ change: Change, at date: Date, into pending: PendingExport?, isOnServer: Bool) -> PendingExport? {
        switch change {
        case .insert(let keys):
            return .save(full: true, keys: Dictionary(uniqueKeysWithValues: keys.map { ($0, date) }))
        case .update(let keys):
            let changed = Dictionary(uniqueKeysWithValues: keys.map { ($0, date) })
            switch pending {
            case .save(let full, let existing)?:
                return .save(full: full, keys: existing.merging(changed) { _, new in new })
            case .delete?:
                return .save(full: true, keys: changed)
            case nil:
                return .save(full: !isOnServer, keys: changed)
            }
        case .delete:
            return isOnServer ? .delete : nil
        }
    }

    /// The keys to upload, or nil for all of them.
    var keysToUpload: Set<String>? {
        guard case .save(let full, let keys) = self, !full else { return nil }
        return Set(keys.keys)
    }

    /// When each key changed on this device, for conflict resolution.
    var changeDates: [String: Date] {
        guard case .save(_, let keys) = self else { return [:] }
        return keys
    }
}
