import CloudStoreSync
import Foundation
import GRDB

extension MirrorMetadata {
    /// Where mirroring of a store stands, read from its file.
    static func status(_ db: Database) throws -> PersistentCloudContainer.SyncStatus {
        guard try exists(db) else {
            return PersistentCloudContainer.SyncStatus(
                isMirroring: false, user: nil, isSignedOut: false, pendingUploads: 0, refusedUploads: 0,
                serverChangeToken: nil, lastImport: nil, lastExport: nil, lastError: nil, conflictCount: 0)
        }
        let engine = try db.mirrorState(.engineState, as: SyncEngine.State.Serialization.self)
        let lastError = try db.mirrorState(.lastError, as: String.self).map { message in
            PersistentCloudContainer.SyncFailure(
                message: message, date: (try? db.mirrorState(.lastErrorDate, as: Date.self)) ?? Date())
        }
        let metadata = try db.tableExists("cloudstore_record_metadata")
        return PersistentCloudContainer.SyncStatus(
            isMirroring: engine != nil,
            user: try db.mirrorState(.userRecordName, as: String.self) ?? engine?.user,
            isSignedOut: try db.mirrorState(.accountStatus, as: String.self) == "signedOut",
            pendingUploads: metadata ? try db.pendingUploadCount() : 0,
            refusedUploads: metadata ? try db.refusedUploads().count : 0,
            serverChangeToken: engine?.databaseSyncToken,
            lastImport: try db.mirrorState(.lastImport, as: Date.self),
            lastExport: try db.mirrorState(.lastExport, as: Date.self), lastError: lastError,
            conflictCount: try Int.fetchOne(db, sql: "SELECT count(*) FROM cloudstore_mirror_conflict") ?? 0)
    }

    /// This device's identifier, made (a UUID) the first time the store mirrors.
    static func deviceID(_ db: Database) throws -> String {
        try create(db)
        if let id = try db.mirrorState(.deviceID, as: String.self) { return id }
        let id = UUID().uuidString
        try db.setMirrorState(.deviceID, encoding: id)
        return id
    }
}
