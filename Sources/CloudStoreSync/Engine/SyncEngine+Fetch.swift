import CloudStoreLogging
import CloudStoreWire
import Foundation
import Logging

extension SyncEngine {
    /// One fetch operation: `willFetchChanges`, the database's changed zones (paging), then each
    /// changed zone in scope (paging), then `didFetchChanges`. The caller holds the operation turn.
    ///
    /// A token the server rejects (`CHANGE_TOKEN_EXPIRED`, or `BAD_REQUEST` on a request that
    /// carried a token) is dropped and the database or zone is fetched again from scratch in the
    /// same operation.
    func fetch(_ context: FetchChangesContext) async throws {
        do {
            try checkCanOperate()
        } catch {
            throw await settle(error, of: .fetch)
        }
        do {
            try await checkAccount()
            try await saveSubscriptionsIfNeeded()
            logger.notice("Fetching changes", metadata: ["reason": "\(context.reason)"])
            emit(.willFetchChanges(Event.WillFetchChanges(context: context)))
            let start = clock.now
            // A scheduled fetch starts from what the last long poll's answer carried; a fetch the
            // app asked for asks the server, so it sees every change made before it began.
            let pushed = context.reason == .scheduled ? pushedChanges : nil
            pushedChanges = nil
            try await fetchDatabaseChanges(pushed: pushed)
            for zoneID in zonesToFetch(context.options) {
                if Task.isCancelled { throw SyncEngineError.cancelled }
                try await fetchZoneChanges(zoneID, pushed: pushed)
            }
            emit(.didFetchChanges(Event.DidFetchChanges(context: context)))
            emitStateUpdateIfNeeded()
            logger.notice("Fetched changes", metadata: ["duration": "\(LogFormat.duration(clock.now - start))"])
            scheduler.succeeded(.fetch, at: clock.now)
            tasks.startListenerIfNeeded(engine: self)
        } catch {
            let settled = await settle(error, of: .fetch)
            emit(.didFetchChanges(Event.DidFetchChanges(context: context, error: error)))
            throw settled
        }
    }

    /// After a fetch of the private database from scratch: zones this engine fetched before (it
    /// holds their tokens) that the server listed neither live nor deleted are zones the server
    /// lost (its data restored from an older or empty copy). Each is fetched again from scratch,
    /// which answers `ZONE_NOT_FOUND` to the delegate
    /// (``Event/didFetchRecordZoneChanges(_:)``): its data is only on this device now. A zone
    /// someone deleted is listed as deleted and is not one of them. The shared database is left
    /// alone: a share that ended may simply no longer be listed there.
    private func refetchVanishedZones(listed: Set<ZoneID>) {
        guard database.scope == .private else { return }
        state.withStorage { storage in
            for zoneID in storage.zoneTokens.keys where !listed.contains(zoneID) {
                logger.warning("Zone no longer listed by the server; fetching it from scratch", metadata: ["zone": "\(zoneID)"])
                storage.setZoneToken(nil, for: zoneID)
                storage.markUnfetched(zoneID)
            }
        }
    }

    /// Zones with unfetched changes in scope, the prioritized ones first.
    private func zonesToFetch(_ options: FetchChangesOptions) -> [ZoneID] {
        let unfetched = state.withStorage { $0.zonesWithUnfetchedChanges }.filter { options.scope.contains($0) }
        let first = options.prioritizedZoneIDs.filter { unfetched.contains($0) }
        return first + unfetched.filter { !first.contains($0) }
    }

    /// The database's changed zones, page by page, the first from `pushed` when it holds the page
    /// for the state's token.
    private func fetchDatabaseChanges(pushed: PushedChanges?) async throws {
        var token = state.withStorage { $0.databaseToken }
        var hasReset = false
        /// Every zone the pages listed, live or deleted, while the fetch runs from scratch.
        var listed: Set<ZoneID>? = token == nil ? [] : nil
        var pushedPage = pushed?.databaseChanges(at: token)
        while true {
            let response: DatabaseChangesResponse
            if let page = pushedPage {
                logger.info("Database changes came with the long poll's answer", metadata: ["token": "\(token ?? "none")"])
                response = page
                pushedPage = nil
            } else {
                logger.info("Fetching database changes", metadata: ["token": "\(token ?? "none")"])
                do {
                    response = try await database.fetchDatabaseChanges(DatabaseChangesRequest(syncToken: token))
                } catch let error as CloudError where token != nil && !hasReset && Self.rejectsToken(error.serverError) {
                    logger.warning(
                        "Server rejected the database token; fetching every zone from scratch",
                        metadata: ["error": "\(error)"])
                    hasReset = true
                    token = nil
                    listed = []
                    state.withStorage { $0.setDatabaseToken(nil) }
                    continue
                }
            }
            var modifications: [ZoneID] = []
            var deletions: [Event.FetchedDatabaseChanges.Deletion] = []
            state.withStorage { storage in
                for zone in response.zones {
                    let zoneID = normalized(zone.zoneID)
                    listed?.insert(zoneID)
                    if zone.isDeleted {
                        deletions.append(.init(zoneID: zoneID, reason: zone.reason ?? .deleted))
                        storage.setZoneToken(nil, for: zoneID)
                        storage.markFetched(zoneID)
                    } else {
                        modifications.append(zoneID)
                        storage.markChanged(zoneID, token: zone.syncToken)
                    }
                }
                storage.setDatabaseToken(response.syncToken)
            }
            logger.info(
                "Fetched database changes",
                metadata: [
                    "modified": "\(modifications.count)", "deleted": "\(deletions.count)",
                    "token": "\(response.syncToken)", "moreComing": "\(response.moreComing)",
                ])
            if !modifications.isEmpty || !deletions.isEmpty {
                emit(
                    .fetchedDatabaseChanges(
                        Event.FetchedDatabaseChanges(modifications: modifications, deletions: deletions)))
            }
            guard response.moreComing else {
                if let listed { refetchVanishedZones(listed: listed) }
                emitStateUpdateIfNeeded()
                return
            }
            emitStateUpdateIfNeeded()
            guard response.syncToken != token || !response.zones.isEmpty else {
                throw CloudError(
                    .invalidResponse,
                    message: "changes/database said moreComing with no zones and an unchanged token; refusing to loop")
            }
            token = response.syncToken
        }
    }

    /// Fetches one zone's changes page by page, with each page's assets when the engine has an
    /// asset directory. A rejected token ends this zone fetch with the error, then the zone is
    /// fetched again from scratch. A failed asset download ends the fetch before its page: the
    /// zone's token stays before it.
    ///
    /// The next page is requested as soon as a page arrives, so it travels and decodes while the
    /// delegate applies this one; its token is stored only when that page is absorbed in turn.
    private func fetchZoneChanges(_ zoneID: ZoneID, pushed: PushedChanges?) async throws {
        var token = state.withStorage { storage in
            let token = storage.zoneTokens[zoneID]
            if token == nil { storage.setFetchingFromScratch(true, zoneID) }
            return token
        }
        var pushedPage = pushed?.zoneChanges(of: zoneID, at: token)
        var hasReset = false
        var next: Task<ZoneChanges, any Error>?
        defer { next?.cancel() }
        emit(.willFetchRecordZoneChanges(Event.WillFetchRecordZoneChanges(zoneID: zoneID, fromScratch: token == nil)))
        while true {
            var page: ZoneChanges
            do {
                if let prefetched = next {
                    next = nil
                    page = try await withTaskCancellationHandler { try await prefetched.value } onCancel: { prefetched.cancel() }
                } else if let pushed = pushedPage {
                    pushedPage = nil
                    logger.info(
                        "Zone changes came with the long poll's answer", metadata: ["zone": "\(zoneID)", "token": "\(token ?? "none")"])
                    page = pushed
                } else {
                    page = try await fetchZonePage(zoneID, token: token)
                }
                if page.moreComing {
                    next = Task { [self, token = page.syncToken] in try await fetchZonePage(zoneID, token: token) }
                }
            } catch let error as CloudError {
                if token != nil && !hasReset && Self.rejectsToken(error.serverError) {
                    logger.warning(
                        "Server rejected the zone token; fetching the zone from scratch",
                        metadata: ["zone": "\(zoneID)", "error": "\(error)"])
                    emit(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zoneID, error: error)))
                    hasReset = true
                    token = nil
                    state.withStorage { storage in
                        storage.setZoneToken(nil, for: zoneID)
                        storage.setFetchingFromScratch(true, zoneID)
                    }
                    emitStateUpdateIfNeeded()
                    emit(
                        .willFetchRecordZoneChanges(Event.WillFetchRecordZoneChanges(zoneID: zoneID, fromScratch: true)))
                    continue
                }
                emit(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zoneID, error: error)))
                if error.code == .zoneNotFound {
                    logger.info("Zone to fetch no longer exists", metadata: ["zone": "\(zoneID)"])
                    state.withStorage { storage in
                        storage.setZoneToken(nil, for: zoneID)
                        storage.markFetched(zoneID)
                    }
                    emitStateUpdateIfNeeded()
                    return
                }
                if error.isTransient || error.serverError == nil || error.isAuthenticationFailure { throw error }
                logger.warning("Zone fetch failed", metadata: ["zone": "\(zoneID)", "error": "\(error)"])
                return
            }
            let downloaded: [URL]
            do {
                let fetched = try await fetchAssets(of: page.records, in: zoneID)
                page.records = fetched.records
                downloaded = fetched.downloaded
            } catch let error as CloudError {
                emit(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zoneID, error: error)))
                throw error
            }
            defer { removeDownloadedAssets(downloaded) }
            try await absorb(page, in: zoneID, previousToken: token, deliverNow: page.moreComing || !downloaded.isEmpty)
            guard page.moreComing else { break }
            token = page.syncToken
        }
        state.withStorage { $0.setFetchingFromScratch(false, zoneID) }
        emit(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zoneID, error: nil)))
    }

    /// One `changes/zone` request; a per-zone error in the answer is thrown as a ``CloudError``.
    /// Nonisolated: the answer decodes off the engine.
    private nonisolated func fetchZonePage(_ zoneID: ZoneID, token: String?) async throws -> ZoneChanges {
        logger.info("Fetching zone changes", metadata: ["zone": "\(zoneID)", "token": "\(token ?? "none")"])
        let request = ZoneChangesRequest(
            zones: [
                .init(
                    zoneID: zoneID, syncToken: token, resultsLimit: configuration.fetchResultsLimit,
                    desiredRecordTypes: configuration.recordTypes?.sorted())
            ])
        let response = try await database.fetchZoneChanges(request)
        switch response.zones.first {
        case .value(let page)?:
            return page
        case .error(let error)?:
            throw CloudError.server(error, httpStatus: error.code.httpStatus)
        case nil:
            throw CloudError(.invalidResponse, message: "changes/zone answered no result for zone \(zoneID)")
        }
    }

    /// Stores a page's token and reports its records, in one event whose state holds the token.
    /// With `deliverNow` (more pages follow, or the page's downloaded assets are removed once it
    /// was delivered) the delegate gets it at once; otherwise with the fetch's next events.
    private func absorb(_ page: ZoneChanges, in zoneID: ZoneID, previousToken: String?, deliverNow: Bool) async throws {
        var modifications: [Record] = []
        var deletions: [Event.FetchedRecordZoneChanges.Deletion] = []
        for var record in page.records {
            record.zoneID = zoneID
            logger.debug(
                "Fetched record change",
                metadata: [
                    "record": "\(record.recordName)", "zone": "\(zoneID)", "change": "\(record.deleted ? "delete" : "save")",
                    "tag": "\(record.recordChangeTag ?? "none")",
                ])
            if record.deleted {
                deletions.append(.init(recordID: record.recordID, recordType: record.recordType))
            } else {
                modifications.append(record)
            }
        }
        let (serialization, version) = state.withStorage { storage in
            storage.setZoneToken(page.syncToken, for: zoneID)
            if !page.moreComing { storage.markFetched(zoneID) }
            return (storage.serialization, storage.version)
        }
        logger.info(
            "Fetched zone changes",
            metadata: [
                "zone": "\(zoneID)", "modified": "\(modifications.count)", "deleted": "\(deletions.count)",
                "token": "\(page.syncToken)", "moreComing": "\(page.moreComing)",
            ])
        if !modifications.isEmpty || !deletions.isEmpty {
            queue(
                .fetchedRecordZoneChanges(
                    Event.FetchedRecordZoneChanges(
                        zoneID: zoneID, modifications: modifications, deletions: deletions,
                        stateSerialization: serialization)),
                carryingStateAt: version)
        }
        emitStateUpdateIfNeeded()
        if deliverNow { await deliverEvents() }
        if page.moreComing && page.records.isEmpty && page.syncToken == previousToken {
            throw CloudError(
                .invalidResponse,
                message: "changes/zone for \(zoneID) said moreComing with no records and an unchanged token; "
                    + "refusing to loop")
        }
    }

    /// Whether the server refused a token: `CHANGE_TOKEN_EXPIRED`, or `BAD_REQUEST` (malformed).
    static func rejectsToken(_ error: ServerError?) -> Bool {
        error?.code == .changeTokenExpired || error?.code == .badRequest
    }
}

extension SyncEngine {
    /// The ID of the query subscription the engine keeps for a record type on the public database.
    public static func subscriptionID(forRecordType recordType: String) -> String { "cloudstore.\(recordType)" }

    /// On the public database with ``Configuration/recordTypes``: saves the query subscription of
    /// each type the state does not list yet (a new user's state lists none), before the fetch
    /// whose token the long poll then listens from. A server that refuses one is logged, and the
    /// engine still fetches (and polls, when it has a poll interval).
    func saveSubscriptionsIfNeeded() async throws {
        guard database.scope == .public, let recordTypes = configuration.recordTypes else { return }
        let missing = recordTypes.subtracting(state.withStorage { $0.subscribedRecordTypes }).sorted()
        guard !missing.isEmpty else { return }
        let request = SubscriptionsModifyRequest(
            operations: missing.map { type in
                .init(.create, Subscription(subscriptionID: Self.subscriptionID(forRecordType: type), query: .init(recordType: type)))
            })
        let response: SubscriptionsResponse
        do {
            response = try await database.modifySubscriptions(request)
        } catch let error as CloudError where error.kind == .invalidResponse || error.serverError.map({ !$0.code.isTransient }) == true {
            logger.warning(
                "The server keeps no subscriptions; fetching without push", metadata: ["error": "\(error)"])
            return
        }
        var saved: [String] = []
        for (type, result) in zip(missing, response.subscriptions) {
            if let error = result.error {
                logger.warning("The server refused a subscription", metadata: ["recordType": "\(type)", "error": "\(error)"])
            } else {
                saved.append(type)
            }
        }
        logger.info("Saved query subscriptions", metadata: ["recordTypes": "\(saved)"])
        state.withStorage { $0.subscribedRecordTypes.formUnion(saved) }
    }
}

extension SyncEngine.Configuration {
    /// Whether a long poll's answer is a reason to fetch: any change, except on the public
    /// database once the subscriptions of ``recordTypes`` are saved (`subscribed`), where only a
    /// notification of one of them is (or a full page of notifications, which may have cut one
    /// off). Before any is saved (the server refused them, say) every change is.
    func isWoken(by response: NotificationsResponse, scope: DatabaseScope, subscribed: Set<String>) -> Bool {
        guard response.changed else { return false }
        guard scope == .public, recordTypes != nil, !subscribed.isEmpty else { return true }
        let notifications = response.notifications ?? []
        let ids = Set(subscribed.map(SyncEngine.subscriptionID(forRecordType:)))
        return notifications.count >= Self.notificationsPerPoll
            || notifications.contains { $0.subscriptionID.map(ids.contains) ?? false }
    }

    /// The most notifications a long poll answers (WireProtocol.md §3, Push).
    static let notificationsPerPoll = 200
}

