import CSQLite
import Foundation
import LifecycleClient
import Logging

// One thing from each module, so that the executable links all three.
let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:8080")!))
print(Logging.line("app started"), csqlite_version_number(), client.configuration.server)
