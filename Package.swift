// swift-tools-version:6.1
import CompilerPluginSupport
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "CloudStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CloudStoreWire", targets: ["CloudStoreWire"]),
        .library(name: "CloudStoreLogging", targets: ["CloudStoreLogging"]),
        .library(name: "CloudStoreSync", targets: ["CloudStoreSync"]),
        .library(name: "CloudStore", targets: ["CloudStore"]),
        .library(name: "CloudStoreServer", targets: ["CloudStoreServer"]),
        .library(name: "CloudStoreTesting", targets: ["CloudStoreTesting"]),
        .library(name: "CloudStoreCLI", targets: ["CloudStoreCLI"]),
        .executable(name: "cloudstore", targets: ["cloudstore"]),
        .executable(name: "cloudstore-bench", targets: ["CloudStoreBenchmarks"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
    ],
    targets: [
        // The wire contract (Sources/CloudStoreWire/CloudStoreWire.docc/WireProtocol.md): records, IDs, field values, requests, responses, errors.
        .target(
            name: "CloudStoreWire",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings),
        // CLOUDSTORE_DEBUG levels and the log line format every subsystem shares.
        .target(
            name: "CloudStoreLogging",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        // The CKSyncEngine analogue: bring your own persistence.
        .target(
            name: "CloudStoreSync",
            dependencies: [
                "CloudStoreWire", "CloudStoreLogging",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings),
        // The `@Model` macro and its property attributes: an entity declared once, on its Swift type.
        .macro(
            name: "CloudStoreMacros",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxBuilder", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            swiftSettings: swiftSettings),
        // Model, SQLite store, history, generations, migrations, mirroring, container.
        .target(
            name: "CloudStore",
            dependencies: [
                "CloudStoreWire", "CloudStoreLogging",
                "CloudStoreSync", "CloudStoreMacros",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        // The example Notes app's model (Schema/Notes.json is written from it), for the demo and the tests.
        .target(
            name: "NotesExample",
            dependencies: ["CloudStore"],
            swiftSettings: swiftSettings),
        // The cloud server as a library.
        .target(
            name: "CloudStoreServer",
            dependencies: [
                "CloudStoreWire", "CloudStoreLogging",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            swiftSettings: swiftSettings),
        // Test support shipped to users: loopback servers, fault injection, devices, temporary stores.
        .target(
            name: "CloudStoreTesting",
            dependencies: [
                "CloudStoreWire", "CloudStoreSync", "CloudStore", "CloudStoreServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings),
        // The `cloudstore` commands as a library, so tests run them as a user would.
        .target(
            name: "CloudStoreCLI",
            dependencies: [
                "CloudStoreWire", "CloudStoreLogging", "CloudStoreSync", "CloudStore", "CloudStoreServer",
                "CloudStoreTesting", "NotesExample",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "cloudstore",
            dependencies: ["CloudStoreCLI"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "CloudStoreBenchmarks",
            dependencies: [
                "CloudStore", "CloudStoreServer", "CloudStoreSync", "CloudStoreTesting", "CloudStoreCLI",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "Benchmarks/CloudStoreBenchmarks",
            swiftSettings: swiftSettings),

        // A child process for the store's crash and multi-process tests (not a product).
        .executableTarget(
            name: "CloudStoreTestHelper",
            dependencies: ["CloudStore", .product(name: "Logging", package: "swift-log")],
            path: "Tests/CloudStoreTestHelper",
            swiftSettings: swiftSettings),

        .testTarget(name: "CloudStoreWireTests", dependencies: ["CloudStoreWire", "CloudStoreTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "CloudStoreLoggingTests", dependencies: ["CloudStoreLogging"], swiftSettings: swiftSettings),
        .testTarget(name: "CloudStoreSyncTests", dependencies: ["CloudStoreSync", "CloudStoreTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "CloudStoreTests",
            dependencies: [
                "CloudStore", "CloudStoreTesting", "CloudStoreTestHelper", "NotesExample",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                // The encryption tests read the server's console pages.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            // Store files an earlier version wrote, opened by path (read, then copied) by the tests.
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "CloudStoreServerTests",
            dependencies: [
                "CloudStoreServer", "CloudStoreTesting",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "CloudStoreMacrosTests",
            dependencies: [
                "CloudStoreMacros",
                .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacroExpansion", package: "swift-syntax"),
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "CloudStoreCLITests",
            dependencies: [
                "CloudStoreCLI", "CloudStoreTesting", "CloudStore", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
    ]
)
