import CloudStoreSync
import CloudStoreTesting
import CloudStoreWire
import Crypto
import Foundation
import Logging
import Synchronization
import Testing

@testable import CloudStoreServer

/// Assets (WireProtocol.md §7) through real HTTP on both backends: upload, save, read, download,
/// ranges, access, receipts, limits and lifetime.
@Suite("assets")
struct ServerAssetsTests {
    /// A client of the private database (or another) speaking through HTTPCloudDatabase.
    func database(_ server: TestServer, token: String = "alice-token", scope: DatabaseScope = .private) -> HTTPCloudDatabase {
        HTTPCloudDatabase(baseURL: server.baseURL, container: "iCloud.test", scope: scope, token: token, deviceID: "device-A")
    }

    /// Bytes in a temporary file.
    func file(_ bytes: [UInt8]) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("asset-\(UUID().uuidString)")
        try Data(bytes).write(to: url)
        return url
    }

    /// `count` bytes of a 256-byte pattern, built by whole patterns: a byte-by-byte loop over 64 MiB
    /// in a debug build would hold a cooperative thread for seconds and stall every other test.
    func bytes(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
        let pattern = (0..<256).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count { result.append(contentsOf: pattern.prefix(count - result.count)) }
        return result
    }

    /// Requests an upload URL and uploads bytes for a record's field.
    func upload(
        _ bytes: [UInt8], _ server: TestServer, record: String = "N-1", field: String = "photo", zone: String = "Notes",
        token: String = "alice-token", scope: DatabaseScope = .private
    ) async throws -> AssetUploadResult {
        let database = database(server, token: token, scope: scope)
        let urls = try await database.requestAssetUploads(
            AssetUploadRequest(
                zoneID: ZoneID(zoneName: zone), tokens: [.init(recordName: record, recordType: "Note", fieldName: field)]))
        let url = try #require(urls.tokens.first?.url)
        #expect(url.hasPrefix(server.baseURL.absoluteString + "/database/1/iCloud.test/development/\(scope.rawValue)/assets/upload/"))
        let source = try file(bytes)
        defer { try? FileManager.default.removeItem(at: source) }
        return try await database.uploadAsset(from: source, to: url)
    }

    /// Downloads an asset through HTTPCloudDatabase; answers its bytes.
    func download(_ url: String, _ server: TestServer, token: String = "alice-token", offset: Int64 = 0, into target: URL? = nil)
        async throws -> [UInt8]
    {
        let target = target ?? FileManager.default.temporaryDirectory.appendingPathComponent("download-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: target) }
        try await database(server, token: token).downloadAsset(from: url, to: target, resumingAt: offset)
        return Array(try Data(contentsOf: target))
    }

    func asset(_ record: Record, _ field: String = "photo") throws -> Asset {
        guard case .asset(let asset)? = record.fields[field] else {
            throw ServerError(.internalError, reason: "record \(record.recordName) has no asset in \(field)")
        }
        return asset
    }

    func badRequestReason(_ client: CloudClient, _ record: Record, zone: String = "Notes", _ type: RecordsModifyRequest.OperationType = .create)
        async throws -> String
    {
        let (_, results) = try await client.modify(zone, [.init(type, record)], atomic: false)
        let error = try #require(results.first?.error, "saved: \(results)")
        #expect(error.serverErrorCode == .badRequest)
        return error.reason ?? ""
    }

    @Test(arguments: Backend.all)
    func uploadSaveLookupDownload_roundTripsTheBytesWithoutReceipt(_ backend: Backend) async throws {
        try await withServer(backend) { server, client in
            try await client.createZone("Notes")
            let content = bytes(300_000)
            let result = try await upload(content, server)
            #expect(result.singleFile.size == 300_000)
            #expect(result.singleFile.fileChecksum == Data(SHA256.hash(data: content)).base64EncodedString())

            let saved = try await client.save([note("N-1", extra: ["photo": .asset(result.asset)])])[0]
            let stored = try asset(saved)
            #expect(stored.receipt == nil)
            #expect(stored.fileChecksum == result.singleFile.fileChecksum && stored.size == 300_000)
            let url = try #require(stored.downloadURL)
            #expect(url.hasPrefix(server.baseURL.absoluteString + "/database/1/iCloud.test/development/private/assets/download/"))
            #expect(url.contains("?\(AssetDownloadURLs.parameter)="))

            let looked = try #require(try await client.lookup(["N-1"]).first?.value)
            #expect(try asset(looked) == stored)
            let changed = try await client.allZoneChanges().records
            #expect(try changed.map { try asset($0) } == [stored])
            #expect(try await download(url, server) == content)
            let path = try #require(URLComponents(string: url)?.path)
            #expect(try await download(path, server) == content, "the path alone, with credentials")

            let answer = try await client.send(.GET, url)
            #expect(answer.status == 200)
            #expect(answer.headers.first(name: "Content-Type") == "application/octet-stream")
            #expect(answer.headers.first(name: "Content-Length") == "300000")
            #expect(answer.headers.first(name: "Accept-Ranges") == "bytes")
            #expect(answer.headers.first(name: "ETag") == "\"\(stored.fileChecksum)\"")
        }
    }

    /// An answer's `downloadURL` is absolute and its own authority (``AssetDownloadURLs``), as a
    /// client that fetches it as given needs (URLSession, node's fetch, an `<img src>`): it
    /// downloads without credentials until it expires, for its asset only; anything altered is 401;
    /// the path alone needs credentials; behind a proxy it names the proxy's scheme and host.
    @Test(arguments: Backend.all)
    func downloadURL_isAbsoluteAndItsOwnAuthorityUntilItExpires(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withServer(backend, clock: clock) { server, client in
            try await client.createZone("Notes")
            let content = bytes(2000)
            let first = try await upload(content, server)
            let second = try await upload(bytes(10, seed: 9), server, record: "N-2")
            let saved = try await client.save([
                note("N-1", extra: ["photo": .asset(first.asset)]), note("N-2", extra: ["photo": .asset(second.asset)]),
            ])
            let url = try #require(try asset(saved[0]).downloadURL)
            let otherURL = try #require(try asset(saved[1]).downloadURL)
            let nobody = client.asUser(nil)

            let fetched = try await nobody.send(.GET, url)
            #expect(fetched.status == 200, "\(fetched.text)")
            #expect(Array(fetched.body) == content)
            let lookedUp = try #require(try await client.lookup(["N-1"]).first?.value)
            #expect(try asset(lookedUp).downloadURL == url, "the same URL within its period: caches keep working")

            let path = try #require(URLComponents(string: url)?.path)
            #expect(try await nobody.send(.GET, path).status == 421, "the path alone needs credentials")
            let access = String(url[url.range(of: "?")!.lowerBound...])
            let swapped = try await nobody.send(.GET, try #require(URLComponents(string: otherURL)?.path) + access)
            #expect(swapped.status == 401, "an access is for its asset only")
            #expect(swapped.error?.reason?.contains("not one this server issued") == true, "\(swapped.text)")
            let parts = access.split(separator: ".")
            let asBob = parts[0] + "." + Base64URL.encode(Data("_bob".utf8)) + "." + parts[2]
            #expect(try await nobody.send(.GET, path + asBob).status == 401, "and for its caller")

            clock.advance(by: 2 * 3600)
            let expired = try await nobody.send(.GET, url)
            #expect(expired.status == 401)
            #expect(expired.error?.reason?.contains("expired") == true, "\(expired.text)")
            #expect(try await client.send(.GET, url).status == 200, "with credentials the URL's access does not matter")
            let relooked = try #require(try await client.lookup(["N-1"]).first?.value)
            let fresh = try #require(try asset(relooked).downloadURL)
            #expect(fresh != url)
            #expect(try await nobody.send(.GET, fresh).status == 200)

            let proxied = try await client.send(
                .POST, client.path(.private, .recordsLookup),
                body: try WireCoding.encode(RecordsLookupRequest(zoneID: ZoneID(zoneName: "Notes"), recordNames: ["N-1"])),
                headers: [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "cloud.example.com")])
            let proxiedRecord = try #require(try proxied.decode(RecordsResponse.self).records.first?.value)
            #expect(try asset(proxiedRecord).downloadURL?.hasPrefix("https://cloud.example.com/database/1/iCloud.test/") == true)
        }
    }

    @Test(arguments: Backend.all)
    func download_honoursSingleRangesAndResumes(_ backend: Backend) async throws {
        try await withServer(backend) { server, client in
            try await client.createZone("Notes")
            let content = bytes(3 << 20)
            let result = try await upload(content, server)
            let saved = try await client.save([note("N-1", extra: ["photo": .asset(result.asset)])])[0]
            let url = try #require(try asset(saved).downloadURL)
            let size = content.count

            let cases: [(String, Range<Int>)] = [
                ("bytes=0-9", 0..<10), ("bytes=\(size - 5)-", (size - 5)..<size), ("bytes=-7", (size - 7)..<size),
                ("bytes=1048570-1048580", 1_048_570..<1_048_581), ("bytes=10-99999999", 10..<size),
            ]
            for (header, range) in cases {
                let answer = try await client.send(.GET, url, headers: [("Range", header)])
                #expect(answer.status == 206, "\(header)")
                #expect(answer.headers.first(name: "Content-Range") == "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)")
                #expect(Array(answer.body) == Array(content[range]), "\(header)")
            }
            let outside = try await client.send(.GET, url, headers: [("Range", "bytes=\(size)-")])
            #expect(outside.status == 416)
            #expect(outside.headers.first(name: "Content-Range") == "bytes */\(size)")

            // A download cut after 1 MiB resumes at its end and ends byte-identical.
            let target = FileManager.default.temporaryDirectory.appendingPathComponent("resume-\(UUID().uuidString)")
            try Data(content[0..<(1 << 20)] + [9, 9, 9]).write(to: target)
            #expect(try await download(url, server, offset: 1 << 20, into: target) == content)
        }
    }

    @Test(arguments: Backend.all)
    func access_anotherUserCannotDownloadNorReuseTheReceipt(_ backend: Backend) async throws {
        try await withServer(backend) { server, client in
            try await client.createZone("Notes")
            let result = try await upload(bytes(1000), server)
            let bob = client.asUser("bob-token")
            try await bob.createZone("Notes")
            let reason = try await badRequestReason(bob, note("N-1", extra: ["photo": .asset(result.asset)]))
            #expect(reason.contains("another user"), "\(reason)")

            let saved = try await client.save([note("N-1", extra: ["photo": .asset(result.asset)])])[0]
            let url = try #require(try asset(saved).downloadURL)
            let denied = try await bob.send(.GET, url)
            #expect(denied.status == 403)
            #expect(denied.error?.serverErrorCode == .accessDenied)
            await #expect(throws: CloudError.self) { _ = try await download(url, server, token: "bob-token") }
            let path = try #require(URLComponents(string: url)?.path)
            #expect(try await client.send(.GET, path + "0").status == 404, "unknown asset")
            #expect(try await client.send(.GET, String(path.dropLast(4)) + "ffff").status == 404, "unknown asset")

            // The public database: any authenticated caller downloads.
            let public_ = try await upload(bytes(500), server, record: "P-1", zone: "_defaultZone", scope: .public)
            let publicRecord = try await client.modify(
                "_defaultZone", [.init(.create, note("P-1", extra: ["photo": .asset(public_.asset)]))], in: .public)
            let publicSaved = try #require(publicRecord.results.first?.value)
            let publicURL = try #require(try asset(publicSaved).downloadURL)
            #expect(try await bob.send(.GET, publicURL).status == 200)
        }
    }

    @Test(arguments: Backend.all)
    func receipt_forAnotherRecordFieldOrZoneOrExpiredIsRefused(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withServer(backend, clock: clock) { server, client in
            try await client.createZone("Notes")
            try await client.createZone("Other")
            let result = try await upload(bytes(1000), server)
            #expect(try await badRequestReason(client, note("N-2", extra: ["photo": .asset(result.asset)])).contains("record N-1"))
            #expect(try await badRequestReason(client, note("N-1", extra: ["thumbnail": .asset(result.asset)])).contains("field photo"))
            #expect(
                try await badRequestReason(client, note("N-1", extra: ["photo": .asset(result.asset)]), zone: "Other")
                    .contains("zone Notes"))
            var wrongSize = result.asset
            wrongSize.size += 1
            #expect(try await badRequestReason(client, note("N-1", extra: ["photo": .asset(wrongSize)])).contains("uploaded bytes"))

            let stale = try await database(server).requestAssetUploads(
                AssetUploadRequest(zoneID: ZoneID(zoneName: "Notes"), tokens: [.init(recordName: "N-1", fieldName: "photo")]))
            clock.advance(by: 16 * 60)
            #expect(try await badRequestReason(client, note("N-1", extra: ["photo": .asset(result.asset)])).contains("expired"))
            let late = try await client.send(
                .POST, try #require(stale.tokens.first?.url), body: Data([1, 2, 3]), headers: [("Content-Type", "application/octet-stream")])
            #expect(late.status == 404, "an expired upload URL")
            #expect(late.error?.reason?.contains("expired") == true)
            let foreign = try await client.asUser("bob-token").send(.POST, try #require(stale.tokens.first?.url), body: Data([1]))
            #expect(foreign.status == 403, "another user's upload URL")
        }
    }

    @Test(arguments: Backend.all)
    func unchangedAsset_sentBackWithoutReceiptIsKeptAMadeUpOneRefused(_ backend: Backend) async throws {
        try await withServer(backend) { server, client in
            try await client.createZone("Notes")
            let result = try await upload(bytes(1000), server)
            let first = try await client.save([note("N-1", extra: ["photo": .asset(result.asset)])])[0]
            // A retry of the same save (its answer lost) with the consumed receipt is accepted.
            let retried = try await client.save([note("N-1", tag: first.recordChangeTag, extra: ["photo": .asset(result.asset)])], .update)[0]
            #expect(try asset(retried) == asset(first))

            let stored = try asset(retried)
            let second = try await client.save(
                [note("N-1", title: "renamed", tag: retried.recordChangeTag, extra: ["photo": .asset(stored.unchanged)])], .replace)[0]
            #expect(try asset(second) == stored)

            let made = Asset(fileChecksum: Data(SHA256.hash(data: [1, 2, 3])).base64EncodedString(), size: 3)
            let reason = try await badRequestReason(client, note("N-1", tag: second.recordChangeTag, extra: ["photo": .asset(made)]), .update)
            #expect(reason.contains("send a receipt"), "\(reason)")
            #expect(try await badRequestReason(client, note("N-9", extra: ["photo": .asset(stored.unchanged)])).contains("send a receipt"))
        }
    }

    @Test(arguments: Backend.all)
    func upload_overTheLimitIs413WithOrWithoutContentLength(_ backend: Backend) async throws {
        var limits = ServerLimits()
        limits.assetBytes = 20_000
        try await withServer(backend, limits: limits) { server, client in
            try await client.createZone("Notes")
            do {
                _ = try await upload(bytes(20_001), server)
                Issue.record("an asset over the limit was accepted")
            } catch let error as CloudError {
                #expect(error.code == .limitExceeded, "\(error)")
                #expect(error.httpStatus == 413)
            }
            let ok = try await upload(bytes(20_000), server)
            #expect(ok.singleFile.size == 20_000)

            let urls = try await database(server).requestAssetUploads(
                AssetUploadRequest(zoneID: ZoneID(zoneName: "Notes"), tokens: [.init(recordName: "N-1", fieldName: "photo")]))
            let chunked = try await client.send(
                .POST, try #require(urls.tokens.first?.url), body: Data(bytes(40_000)),
                headers: [("Content-Type", "application/octet-stream")], chunked: true)
            #expect(chunked.status == 413)
            #expect(chunked.error?.serverErrorCode == .limitExceeded)
        }
    }

    /// Bytes on disk of a SQLite server's container (nil on PostgreSQL).
    func assetFiles(_ server: TestServer) -> Set<String>? {
        guard let directory = server.dataDirectory?.appendingPathComponent("assets/iCloud.test") else { return nil }
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])?
            .compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
        return Set((files ?? []).map(\.lastPathComponent))
    }

    @Test(arguments: Backend.all)
    func lifetime_unreferencedBytesAreRemovedOnTheClockLiveOnesNever(_ backend: Backend) async throws {
        let clock = ManualClock()
        var limits = ServerLimits()
        limits.tombstoneHorizon = 7 * 24 * 3600
        try await withServer(backend, limits: limits, clock: clock) { server, client in
            try await client.createZone("Notes")
            try await client.createZone("Temp")
            let never = try await upload(bytes(100, seed: 1), server, record: "N-0")
            let a = try await upload(bytes(100, seed: 2), server)
            let kept = try await upload(bytes(100, seed: 3), server, record: "N-2")
            let deleted = try await upload(bytes(100, seed: 4), server, record: "N-3")
            let inZone = try await upload(bytes(100, seed: 5), server, record: "T-1", zone: "Temp")
            let v1 = try await client.save([
                note("N-1", extra: ["photo": .asset(a.asset)]), note("N-2", extra: ["photo": .asset(kept.asset)]),
                note("N-3", extra: ["photo": .asset(deleted.asset)]),
            ])
            let temp = try await client.save("Temp", [note("T-1", extra: ["photo": .asset(inZone.asset)])])[0]
            let b = try await upload(bytes(100, seed: 6), server)
            _ = try await client.save([note("N-1", tag: v1[0].recordChangeTag, extra: ["photo": .asset(b.asset)])], .update)
            _ = try await client.modify([.init(.forceDelete, Record(recordName: "N-3"))])
            let zoneDeletion = try await client.call(
                .private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Temp"))]))
            #expect(zoneDeletion.status == 200)
            let urls = try [v1[0], v1[1], v1[2], temp].map { try #require(try asset($0).downloadURL) }
            let filesBefore = assetFiles(server)
            #expect(filesBefore?.count ?? 6 == 6)

            // The replaced asset goes at the next sweep; the deleted ones stay within the horizon.
            try await server.server.sweepAssets()
            #expect(try await client.send(.GET, urls[0]).status == 404, "replaced")
            #expect(try await client.send(.GET, urls[1]).status == 200, "live")
            #expect(try await client.send(.GET, urls[2]).status == 200, "deleted, within the horizon")
            #expect(try await client.send(.GET, urls[3]).status == 200, "zone deleted, within the horizon")
            // Saving under another name shows whether the server still knows the receipt.
            let neverReason = try await badRequestReason(client, note("N-5", extra: ["photo": .asset(never.asset)]))
            #expect(neverReason.contains("record N-0"), "never saved, receipt still valid: \(neverReason)")

            clock.advance(by: 16 * 60)
            #expect(try await server.server.sweepAssets() == 1, "never saved, receipt expired")
            #expect(try await badRequestReason(client, note("N-5", extra: ["photo": .asset(never.asset)])).contains("unknown"))

            clock.advance(by: 7 * 24 * 3600)
            #expect(try await server.server.sweepAssets() == 2, "deleted record and zone, past the horizon")
            #expect(try await client.send(.GET, urls[2]).status == 404)
            #expect(try await client.send(.GET, urls[3]).status == 404)
            clock.advance(by: 365 * 24 * 3600)
            #expect(try await server.server.sweepAssets() == 0)
            let live = try await client.lookup(["N-1", "N-2"]).compactMap(\.value).map { try asset($0) }
            #expect(live.count == 2)
            for (asset, content) in zip(live, [bytes(100, seed: 6), bytes(100, seed: 3)]) {
                #expect(try await download(try #require(asset.downloadURL), server) == content, "live assets are never removed")
            }
            if let files = assetFiles(server) {
                let liveIDs = Set(live.compactMap { $0.downloadURL.flatMap(AssetLocation.assetID(inDownloadURL:)) })
                #expect(files == liveIDs, "only the live assets' files remain")
            }
        }
    }

    /// 64 MiB up and down through the server: the storage receives and hands out pieces of at most
    /// 1 MiB (never the whole asset), and the bytes arrive intact.
    @Test(arguments: Backend.all)
    func transfer_of64MiBStreamsInBoundedChunks(_ backend: Backend) async throws {
        try await backend.withFreshServerStorage { storage in
            let directory = try TemporaryDirectory(prefix: "cloudstore-assets")
            let largest = Mutex(0)
            let total = Mutex(0)
            var configuration = ServerConfiguration(
                port: 0,
                storage: storage,
                containers: ["iCloud.test"], users: TestServer.defaultUsers,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            configuration.assetChunkObserver = { count in
                largest.withLock { $0 = max($0, count) }
                total.withLock { $0 += count }
            }
            let server = try await CloudServer.start(configuration: configuration)
            let client = CloudClient(baseURL: server.baseURL)
            do {
                try await client.createZone("Notes")
                let source = directory.url.appendingPathComponent("source")
                _ = FileManager.default.createFile(atPath: source.path, contents: nil)
                let handle = try FileHandle(forWritingTo: source)
                var hasher = SHA256()
                for index in 0..<64 {
                    let piece = Data(bytes(1 << 20, seed: UInt8(index)))
                    hasher.update(data: piece)
                    try handle.write(contentsOf: piece)
                }
                try handle.close()
                // Two minutes without a byte before the transfer gives up: under the whole suite
                // on two cores a 64 MiB upload once stalled for the default 30 s.
                let database = HTTPCloudDatabase(
                    baseURL: server.baseURL, container: "iCloud.test", token: "alice-token", deviceID: "device-A",
                    requestTimeout: .seconds(120))
                let urls = try await database.requestAssetUploads(
                    AssetUploadRequest(zoneID: ZoneID(zoneName: "Notes"), tokens: [.init(recordName: "N-1", fieldName: "photo")]))
                let result = try await database.uploadAsset(from: source, to: try #require(urls.tokens.first?.url))
                #expect(result.singleFile.size == 64 << 20)
                #expect(result.singleFile.fileChecksum == Data(hasher.finalize()).base64EncodedString())
                #expect(total.withLock { $0 } == 64 << 20)

                let saved = try await client.save([note("N-1", extra: ["photo": .asset(result.asset)])])[0]
                let target = directory.url.appendingPathComponent("target")
                try await database.downloadAsset(from: try #require(try asset(saved).downloadURL), to: target, resumingAt: 0)
                #expect(total.withLock { $0 } == 128 << 20)
                #expect(largest.withLock { $0 } <= AssetStorageChunk.bytes)
                let downloaded = try FileHandle(forReadingFrom: target)
                var check = SHA256()
                while let piece = try downloaded.read(upToCount: 1 << 20), !piece.isEmpty { check.update(data: piece) }
                try downloaded.close()
                #expect(Data(check.finalize()).base64EncodedString() == result.singleFile.fileChecksum)
            } catch {
                try? await server.shutdown()
                throw error
            }
            try await server.shutdown()
            withExtendedLifetime(directory) {}
        }
    }
}
