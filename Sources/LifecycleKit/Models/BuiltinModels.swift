/// The built-in models, kept as JSON so they go through the same loader as any
/// user model and double as examples of the file format.
enum BuiltinModels {
    /// The iOS lifecycle of DuckDuckGo's AppStateMachine, row for row: its tables are in docs/MODEL.md#the-ios-app-model.
    static let iosApp = #"""
    {
      "name": "ios-app",
      "title": "iOS app lifecycle (DuckDuckGo AppStateMachine)",
      "states": [
        {"name": "initializing", "kind": "initial"},
        {"name": "launching", "kind": "transient"},
        {"name": "connected", "kind": "transient"},
        {"name": "foreground", "kind": "permanent", "actionHook": "Foreground.handle"},
        {"name": "background", "kind": "permanent"},
        {"name": "terminating", "kind": "terminal", "otherEvents": "ignored"},
        {"name": "simulated", "kind": "terminal", "otherEvents": "ignored"}
      ],
      "events": [
        {"name": "didFinishLaunching", "parameters": [
          {"name": "isTesting", "type": "boolean"},
          {"name": "setupError", "type": "string"}
        ]},
        {"name": "willConnectToWindow", "parameters": [
          {"name": "window", "type": "string", "required": true, "minLength": 1}
        ], "effects": ["markSceneConnected"]},
        {"name": "didBecomeActive"},
        {"name": "willResignActive"},
        {"name": "willEnterForeground"},
        {"name": "didEnterBackground"}
      ],
      "actions": [
        {"name": "openURL", "parameters": [{"name": "url", "type": "string", "required": true, "minLength": 1}]},
        {"name": "handleShortcutItem", "parameters": [{"name": "type", "type": "string", "required": true, "minLength": 1}]},
        {"name": "handleUserActivity", "parameters": [{"name": "activityType", "type": "string", "required": true, "minLength": 1}]}
      ],
      "transitions": [
        {"from": "initializing", "event": "didFinishLaunching",
         "when": [{"parameter": "isTesting", "equals": true}],
         "to": "simulated", "hooks": ["Simulated.init"]},
        {"from": "initializing", "event": "didFinishLaunching",
         "when": [{"parameter": "isTesting", "notEquals": true}, {"parameter": "setupError", "present": false}],
         "to": "launching", "hooks": ["Launching.init"],
         "effects": ["startLaunch", "breadcrumb:launched"]},
        {"from": "initializing", "event": "didFinishLaunching",
         "when": [{"parameter": "isTesting", "notEquals": true}, {"parameter": "setupError", "present": true}],
         "to": "terminating", "hooks": ["Launching.init", "Terminating.init"],
         "effects": ["startLaunch", "breadcrumb:terminating"]},
        {"from": "launching", "event": "willConnectToWindow", "to": "connected", "hooks": ["Connected.init"],
         "effects": ["breadcrumb:window-connected", "breadcrumb:ui-attached", "rememberWindow"]},
        {"from": "connected", "event": "didBecomeActive", "to": "foreground",
         "hooks": ["Foreground.onTransition", "Foreground.didReturn"],
         "effects": ["deliverAction", "clearBreadcrumb"]},
        {"from": "connected", "event": "didEnterBackground", "to": "background",
         "hooks": ["Background.onTransition", "Background.didReturn"],
         "effects": ["clearAction", "clearBreadcrumb"]},
        {"from": "connected", "event": "willEnterForeground", "outcome": "ignored"},
        {"from": "connected", "event": "willConnectToWindow", "effects": ["rememberWindow"]},
        {"from": "foreground", "event": "didBecomeActive", "hooks": ["Foreground.didReturn"]},
        {"from": "foreground", "event": "willResignActive", "hooks": ["Foreground.willLeave"]},
        {"from": "foreground", "event": "didEnterBackground", "to": "background",
         "hooks": ["Background.onTransition", "Background.didReturn"],
         "effects": ["clearBreadcrumb"]},
        {"from": "foreground", "event": "willConnectToWindow", "to": "connected", "hooks": ["Connected.init"],
         "effects": ["rememberWindow"]},
        {"from": "background", "event": "didBecomeActive", "to": "foreground",
         "hooks": ["Foreground.onTransition", "Foreground.didReturn"],
         "effects": ["deliverAction", "clearBreadcrumb"]},
        {"from": "background", "event": "didEnterBackground", "hooks": ["Background.didReturn"],
         "effects": ["clearAction"]},
        {"from": "background", "event": "willEnterForeground", "hooks": ["Background.willLeave"]},
        {"from": "background", "event": "willConnectToWindow", "to": "connected", "hooks": ["Connected.init"],
         "effects": ["rememberWindow"]},
        {"from": "simulated", "event": "willConnectToWindow", "hooks": ["Simulated.configure"]},
        {"from": "terminating", "event": "willConnectToWindow", "hooks": ["Terminating.alertAndTerminate"]}
      ]
    }
    """#

    /// Jetpack Lifecycle's Activity states and events; every other pair is unexpected.
    static let androidActivity = #"""
    {
      "name": "android-activity",
      "title": "Android Activity lifecycle (Jetpack Lifecycle)",
      "states": [
        {"name": "initialized", "kind": "initial"},
        {"name": "created", "kind": "permanent"},
        {"name": "started", "kind": "permanent"},
        {"name": "resumed", "kind": "permanent"},
        {"name": "destroyed", "kind": "terminal"}
      ],
      "events": [
        {"name": "onCreate"}, {"name": "onStart"}, {"name": "onResume"},
        {"name": "onPause"}, {"name": "onStop"}, {"name": "onDestroy"}
      ],
      "transitions": [
        {"from": "initialized", "event": "onCreate", "to": "created", "hooks": ["Activity.onCreate"]},
        {"from": "created", "event": "onStart", "to": "started", "hooks": ["Activity.onStart"]},
        {"from": "started", "event": "onResume", "to": "resumed", "hooks": ["Activity.onResume"]},
        {"from": "resumed", "event": "onPause", "to": "started", "hooks": ["Activity.onPause"]},
        {"from": "started", "event": "onStop", "to": "created", "hooks": ["Activity.onStop"]},
        {"from": "created", "event": "onDestroy", "to": "destroyed", "hooks": ["Activity.onDestroy"]}
      ]
    }
    """#
}
