import Foundation
import GRDB

extension MirrorTables {
    /// Prepares a store for mirroring, in the caller's transaction, once its tables are migrated
    /// (``migrate(_:)``): moves a store written by the previous mirroring core to this layout
    /// (once, see ``LegacyMirrorLayout``), gives the primary zone its row (``LegacyMirrorLayout/movePrimaryZoneIntoItsRow(_:named:)``),
    /// and marks the file as requiring the ``PendingUploadRecorder``, so no writer can save changes
    /// that are never uploaded. Answers whether the store mirrors for the first time: its objects
    /// were saved with no recorder, and none of them is an upload yet.
    @discardableResult
    static func prepare(_ context: WriteContext, store: PersistentStore, schema: Schema, primaryZone: ZoneID) throws -> Bool {
        let first = try PersistentStore.requiredObserver(context.db) != PendingUploadRecorder.requiredName && !LegacyMirrorLayout.isPresent(context.db)
        try LegacyMirrorLayout.migrate(context, store: store, schema: schema)
        try LegacyMirrorLayout.movePrimaryZoneIntoItsRow(Ledger(context.db), named: primaryZone)
        try PersistentStore.requireObserver(named: PendingUploadRecorder.requiredName, context.db)
        return first
    }
}

/// The layout the previous mirroring core wrote, which decided pending uploads later, by folding
/// history from an export position into `cloudstore_mirror_record`.
///
/// Migrating a store written that way, once, when a container opens it:
/// 1. its metadata rows move to `cloudstore_record_metadata`; a record with an upload pending may
///    have reached the server with its answer lost, so it counts as possibly on the server;
/// 2. references waiting for their target move to `cloudstore_mirror_unresolved_reference`;
/// 3. local history after the export position, which the old core had not folded yet, is recorded
///    as pending uploads, with the same rules a save follows now (``PendingUploadRecording``); if
///    that history was purged, every object is compared with the server copy it last agreed with;
/// 4. the export position is deleted. The sync engine's old copy of the pending changes is dropped
///    when the engine starts (``CloudMirror``).
enum LegacyMirrorLayout {
    static let recordTable = "cloudstore_mirror_record"
    static let referenceTable = "cloudstore_mirror_pending_reference"
    /// The `cloudstore_mirror_state` key of the history token the old core had folded through.
    static let exportPositionKey = "exported_through"

    /// Whether the store still holds any part of this layout (a container has not opened it since
    /// the previous core wrote it).
    static func isPresent(_ db: Database) throws -> Bool {
        guard try db.tableExists("cloudstore_mirror_state") else { return false }
        if try db.tableExists(recordTable) || db.tableExists(referenceTable) { return true }
        return try db.integer("SELECT 1 FROM cloudstore_mirror_state WHERE key = ?", [.string(exportPositionKey)]) != nil
    }

    /// Gives the primary zone its row, named as the container names it, once: where it stood on
    /// the server and the decision the app was asked for come from the state keys that kept them
    /// (before that, where it stood was two flags, `zone_saved` and `purged_zone`). A container
    /// that names its zone otherwise than the last one renames the row.
    static func movePrimaryZoneIntoItsRow(_ ledger: Ledger, named zoneID: ZoneID) throws {
        if var row = try ledger.primaryZone() {
            guard row.zoneID != zoneID else { return }
            try ledger.deleteZone(row.zoneID)
            row.zoneID = zoneID
            try ledger.save(row)
            return
        }
        let db = ledger.db
        let flags = try Dictionary(
            Row.fetchAll(db, sql: "SELECT key, value FROM cloudstore_mirror_state WHERE key IN ('zone_saved', 'purged_zone')")
                .map { row -> (String, Bool) in (row[0], try MirrorTables.decode(Bool.self, row[1])) }
        ) { first, _ in first }
        let flagged: ZoneServerState? =
            flags.isEmpty ? nil : flags["purged_zone"] == true ? .purged : flags["zone_saved"] == true ? .saved : .unsaved
        var row = MirrorZone(
            zoneID: zoneID, role: .primary,
            serverState: try ledger.state(.primaryZoneBeforeMirror2, as: ZoneServerState.self) ?? flagged ?? .unsaved)
        row.decision = try ledger.state(.localDataDecisionBeforeMirror2, as: PersistentCloudContainer.LocalDataDecision.self)
        try ledger.save(row)
        try db.execute(
            sql: """
                DELETE FROM cloudstore_mirror_state
                WHERE key IN ('zone_saved', 'purged_zone', 'primary_zone', 'primary_zone_name', 'local_data_decision')
                """)
    }

    static func migrate(_ context: WriteContext, store: PersistentStore, schema: Schema) throws {
        let db = context.db
        if try db.tableExists(recordTable) {
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO cloudstore_record_metadata
                    (record_name, entity, change_tag, may_be_on_server, ancestor, unknown_fields, pending_upload,
                     upload_revision, refusal, link_relationship, link_source, link_target)
                    SELECT record_name, entity, change_tag, change_tag IS NOT NULL OR pending IS NOT NULL, ancestor,
                           unknown_fields, pending, CASE WHEN pending IS NULL THEN NULL ELSE 1 END, NULL,
                           link_relationship, link_source, link_target
                    FROM \(recordTable);
                    DROP TABLE \(recordTable);
                    """)
            _ = try Ledger(db).revision()
        }
        if try db.tableExists(referenceTable) {
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO cloudstore_mirror_unresolved_reference (entity, id, relationship, target)
                    SELECT entity, id, relationship, target FROM \(referenceTable);
                    DROP TABLE \(referenceTable);
                    """)
        }
        guard let position = try Data.fetchOne(
            db, sql: "SELECT value FROM cloudstore_mirror_state WHERE key = ?", arguments: [exportPositionKey])
        else { return }
        let token = try MirrorTables.decode(HistoryToken.self, position)
        var recording = PendingUploadRecording(context: context, schema: schema, recordKeys: RecordKeys(schema), date: Date())
        do {
            try recordHistory(of: store, after: token, into: &recording)
        } catch let error as StoreError where error.code == .historyTokenExpired {
            try recordDifferencesFromAncestors(schema: schema, into: &recording)
        }
        try recording.finish()
        try db.execute(sql: "DELETE FROM cloudstore_mirror_state WHERE key = ?", arguments: [exportPositionKey])
    }

    /// Records the local changes of history after `token`, as their saves would record them now.
    private static func recordHistory(
        of store: PersistentStore, after token: HistoryToken, into recording: inout PendingUploadRecording
    ) throws {
        var after: HistoryToken? = token
        while true {
            let page = try store.historyPage(
                recording.context.db, after: after,
                filter: HistoryFilter(excludingAuthors: [MirrorAuthor.import], limit: 500))
            for transaction in page.transactions {
                recording.date = transaction.timestamp
                for change in transaction.changes { try recording.record(change) }
            }
            guard page.transactions.count == 500 else { return }
            after = HistoryToken(storeIdentifier: store.storeIdentifier, transactionNumber: page.scannedThrough)
        }
    }

    /// History was purged past the export position: records, for every mirrored object, what
    /// differs from the server copy it last agreed with (all of it when it has none), a delete for
    /// every record on the server that is gone here, and every many-to-many link to compare.
    private static func recordDifferencesFromAncestors(
        schema: Schema, into recording: inout PendingUploadRecording
    ) throws {
        let context = recording.context
        var seen: Set<String> = []
        for entity in schema.mirroredEntities {
            let links = Set(LinkRecords.sides(of: entity, in: schema).map(\.0.name))
            for snapshot in try context.fetchSnapshots(entityName: entity.name) {
                seen.insert(snapshot.id.uuidString)
                let metadata = try recording.ledger.find(snapshot.id.uuidString)
                let change: HistoryChange.ChangeType
                var keys = links
                if let ancestor = try metadata?.ancestor, metadata?.isOnServer == true {
                    change = .update
                    keys.formUnion(entity.recordKeys.filter { (snapshot.values[$0] ?? .null) != (ancestor[$0] ?? .null) })
                } else {
                    change = .insert
                }
                try recording.record(
                    HistoryChange(
                        entityName: entity.name, objectID: snapshot.id, changeType: change, updatedProperties: keys,
                        tombstone: [:]))
            }
        }
        for metadata in try recording.ledger.allRecords() where metadata.link == nil && !seen.contains(metadata.recordName) {
            guard let id = UUID(text: metadata.recordName) else { continue }
            try recording.record(
                HistoryChange(entityName: metadata.entityName, objectID: id, changeType: .delete, updatedProperties: [], tombstone: [:]))
        }
    }
}
