//! Canned model output for `ladle demo`.
//!
//! The built-in demo upstream simulates an OpenAI-compatible chat completions
//! endpoint. Instead of calling a real model it streams one of the answers below,
//! split into chunks, exactly as a model would write them: some answers are bare
//! JSON, others wrap the JSON in friendly prose and a ```json fence, and a few
//! carry the quirks real models produce (nutrition written in English number
//! words, Chinese numerals, "720 kcal" strings, mixed ingredient shapes, step
//! objects). That way a demo run exercises the same normalization path
//! (contract section 3.3) that production traffic does.
//!
//! `RECIPES` answers the `recipe` task (`output = "recipe"`), `FRIDGE` answers
//! the `fridge` task (`output = "json"`). The content does not depend on the
//! variables the caller sent; the demo simply picks one.

/// One canned answer: optional reasoning text, then the content the model writes.
pub struct CannedAnswer {
    /// What the model "thinks" first (streamed as `reasoning_content`); empty for none.
    pub reasoning: &'static str,
    /// The answer text itself (streamed as `content`).
    pub content: &'static str,
}

/// Recipes the demo writes, whole JSON answers as a model would (some with prose and a ```json fence around).
pub const RECIPES: &[CannedAnswer] = &[
    // Well-behaved, but with prose and a fence around the JSON.
    CannedAnswer {
        reasoning: "",
        content: r#"好的，这是一道经典的家常快手菜，按 2 人份准备：

```json
{
  "title": "番茄炒蛋",
  "summary": "酸甜开胃的国民家常菜，鸡蛋嫩滑、番茄出汁，汤汁拌饭特别香，十几分钟就能上桌。",
  "servings": 2,
  "time_minutes": 15,
  "difficulty": "简单",
  "ingredients": [
    {"name": "鸡蛋", "amount": "3个"},
    {"name": "番茄", "amount": "2个（约300克）"},
    {"name": "小葱", "amount": "1根"},
    {"name": "白糖", "amount": "5克"},
    {"name": "盐", "amount": "3克"},
    {"name": "食用油", "amount": "25毫升"}
  ],
  "steps": [
    "番茄顶部划十字，放入开水中烫30秒，捞出撕去外皮，切成滚刀块；小葱切成葱花。",
    "鸡蛋磕入碗中，加1克盐和1汤匙清水，用筷子充分打散至起细泡。",
    "热锅倒入约20毫升油，油温升到六成热（筷子插入周围冒小泡）时倒入蛋液，待边缘凝固后用铲子大块推散，炒至七成熟立即盛出。",
    "锅中留底油，放入番茄块中火翻炒2分钟，用铲子轻压出汁，加入白糖和剩下的盐炒匀。",
    "番茄汁变浓稠后倒回鸡蛋，翻炒几下让鸡蛋裹上汤汁，撒上葱花即可出锅。"
  ],
  "pairing": ["白米饭", "紫菜蛋花汤", "蒜蓉炒青菜"],
  "tips": [
    "蛋液里加一点清水，炒出来更蓬松嫩滑。",
    "鸡蛋第一次只炒到七成熟，回锅后再加热就刚好，不会变老。",
    "番茄不够熟、酸味重时，多加一点糖平衡；想要汤汁多，可以加2汤匙清水。"
  ],
  "nutrition": {"calories": 250, "protein": "10克", "fat": "20克", "carbs": "9克"}
}
```

祝您做饭愉快！如果家里有人不爱吃酸，可以挑熟透的沙瓤番茄。"#,
    },
    // The "forty-eight 克" answer: English number words in nutrition, mixed
    // ingredient shapes and step objects, prose and a fence around.
    CannedAnswer {
        reasoning: "",
        content: r#"好的，下面是为您准备的菜谱：

```json
{
  "title": "香酥鸭",
  "summary": "先腌后蒸再炸的川味做法，外皮金黄酥脆、肉质软烂脱骨，带着花椒的麻香，适合周末请客。",
  "servings": 4,
  "time_minutes": 240,
  "difficulty": "中等",
  "ingredients": [
    {"name": "鸭子", "amount": "1只（约1.5公斤）"},
    {"name": "生姜", "quantity": "1块（约30克）"},
    "大葱 2根",
    "八角 3个",
    "花椒 1汤匙",
    {"item": "料酒", "qty": "3汤匙"},
    {"name": "盐", "amount": "15克"},
    {"ingredient": "玉米淀粉", "amount": "2汤匙"},
    {"name": "食用油", "amount": "1升（炸用，实际消耗约50毫升）"},
    "椒盐"
  ],
  "steps": [
    {"step": 1, "text": "鸭子洗净，剁去鸭屁股，用厨房纸吸干水分。盐和花椒放入干锅小火炒香，趁热把鸭子里外抹匀。"},
    {"step": 2, "text": "姜切片、葱切段，和八角一起塞进鸭腹，表面淋上料酒，盖保鲜膜冷藏腌制2小时。"},
    "腌好的鸭子连同姜葱八角放入蒸锅，水开后大火蒸90分钟，蒸到筷子能轻松插透鸭腿。",
    {"step": 4, "description": "取出鸭子，拣掉香料，放在通风处晾20分钟，让表皮彻底干爽，再薄薄拍一层玉米淀粉。"},
    {"step": 5, "content": "油烧到七成热（约180℃），放入鸭子，中火炸约8分钟，期间不断舀热油淋在表面，炸到外皮金黄酥脆。"},
    {"instruction": "捞出控油，稍凉后斩成块装盘，随椒盐一起上桌。"}
  ],
  "pairing": ["清炒时蔬", "冬瓜排骨汤", "白米饭"],
  "tips": [
    "腌制时间不要少于2小时，时间充裕可以冷藏腌一夜，更入味。",
    "下锅炸之前表皮一定要晾干，否则容易溅油，也炸不酥。",
    "家里锅小的话，可以把鸭子对半剖开，分两次炸。"
  ],
  "nutrition": {"calories": 720, "protein": "forty-eight 克", "fat": "fifty-two 克", "carbs": "twelve 克"}
}
```

祝您烹饪愉快！"#,
    },
    // Bare JSON after a short reasoning; calories and grams as loose strings.
    CannedAnswer {
        reasoning: "用户想做红烧肉，3人份，用500克五花肉正好。家常做法：冷水焯水去腥，煸出多余油脂，冰糖炒糖色上色，小火炖一小时再大火收汁。营养按每人约170克五花肉估算，脂肪偏高，要在小贴士里提醒。",
        content: r#"{
  "title": "红烧肉",
  "summary": "冰糖炒糖色的家常红烧肉，色泽红亮、肥而不腻，入口即化，汤汁浇在米饭上就是一碗。",
  "servings": 3,
  "time_minutes": 90,
  "difficulty": "中等",
  "ingredients": [
    {"name": "带皮五花肉", "amount": "500克"},
    {"name": "冰糖", "amount": "30克"},
    {"name": "生姜", "amount": "5片"},
    {"name": "大葱", "amount": "1根"},
    {"name": "八角", "amount": "2个"},
    {"name": "桂皮", "amount": "1小段"},
    {"name": "香叶", "amount": "2片"},
    {"name": "料酒", "amount": "2汤匙"},
    {"name": "生抽", "amount": "2汤匙"},
    {"name": "老抽", "amount": "1汤匙"},
    {"name": "盐", "amount": "适量"},
    {"name": "开水", "amount": "约600毫升"}
  ],
  "steps": [
    "五花肉刮净猪皮上的残毛，切成3厘米见方的块；大葱切段。",
    "肉块冷水下锅，加2片姜和1汤匙料酒，大火烧开后撇去浮沫，再煮3分钟，捞出用温水洗净沥干。",
    "锅中不放油，下肉块中小火煸炒约8分钟，炒到表面微黄、逼出油脂，盛出后把多余的油倒掉，只留1汤匙。",
    "小火放入冰糖，不停翻炒至冰糖融化、颜色变成枣红色并冒小泡，马上倒入肉块快速翻炒，让每块都裹上糖色。",
    "加入剩下的姜片、葱段、八角、桂皮和香叶炒出香味，沿锅边淋入剩下的料酒，再加生抽和老抽翻匀。",
    "倒入没过肉块的开水，大火烧开后转小火，盖上锅盖炖60分钟，中途翻动一两次防止粘锅。",
    "尝一下咸淡，按口味加盐，拣出香料，开盖转大火收汁，边收边翻动，汤汁浓稠、裹满肉块即可出锅。"
  ],
  "pairing": ["白米饭", "清炒时蔬", "紫菜蛋花汤"],
  "tips": [
    "炒糖色全程用小火，颜色到枣红色就要下肉，炒过头会发苦。",
    "炖肉时一定加开水，加冷水会让肉质收紧变柴。",
    "收汁时要守在锅边，汤汁变少后很容易糊底。",
    "这道菜脂肪较高，搭配一个清淡的素菜更均衡。"
  ],
  "nutrition": {"calories": "680 kcal", "protein": "约22g", "fat": "60 克", "carbs": "14克"}
}"#,
    },
    // Bare JSON, nothing unusual: the happy path.
    CannedAnswer {
        reasoning: "",
        content: r#"{
  "title": "清炒时蔬",
  "summary": "西兰花、胡萝卜和荷兰豆一起清炒，颜色鲜亮、口感爽脆，十来分钟就能做好的清淡素菜。",
  "servings": 2,
  "time_minutes": 15,
  "difficulty": "简单",
  "ingredients": [
    {"name": "西兰花", "amount": "200克"},
    {"name": "胡萝卜", "amount": "半根（约80克）"},
    {"name": "荷兰豆", "amount": "100克"},
    {"name": "大蒜", "amount": "3瓣"},
    {"name": "盐", "amount": "2克"},
    {"name": "蚝油", "amount": "1茶匙"},
    {"name": "食用油", "amount": "15毫升"}
  ],
  "steps": [
    "西兰花掰成小朵，用淡盐水浸泡10分钟后冲洗干净；胡萝卜切薄片，荷兰豆撕去两边的老筋，大蒜切末。",
    "锅中烧开水，加几滴油和少许盐，先下胡萝卜片焯1分钟，再下西兰花和荷兰豆焯1分钟，捞出过凉水沥干。",
    "热锅倒油，小火放入蒜末炒出香味，不要炒焦。",
    "转大火，倒入焯好的蔬菜快速翻炒1分钟，加盐和蚝油翻匀，立即出锅。"
  ],
  "pairing": ["红烧肉", "番茄炒蛋", "白米饭"],
  "tips": [
    "焯水时加几滴油和少许盐，蔬菜颜色更翠绿。",
    "焯好后过一下凉水，可以保持爽脆口感。",
    "大火快炒，时间越短越能保住蔬菜的脆嫩。"
  ],
  "nutrition": {"calories": 110, "protein": "4克", "fat": "7克", "carbs": "10克"}
}"#,
    },
    // Nutrition in Chinese numerals, prose and a fence around.
    CannedAnswer {
        reasoning: "麻婆豆腐讲究麻、辣、烫、香、酥、嫩。2人份用一块嫩豆腐加少量牛肉末，豆腐先用盐水焯一下，勾芡分三次。",
        content: r#"没问题！这是一道下饭神器，做法如下：

```json
{
  "title": "麻婆豆腐",
  "summary": "川菜里的家常经典，豆腐嫩滑、牛肉末酥香，麻辣鲜烫，特别下饭。",
  "servings": 2,
  "time_minutes": 20,
  "difficulty": "简单",
  "ingredients": [
    {"name": "嫩豆腐", "amount": "1块（约400克）"},
    {"name": "牛肉末", "amount": "80克"},
    {"name": "郫县豆瓣酱", "amount": "1汤匙"},
    {"name": "豆豉", "amount": "10克"},
    {"name": "辣椒面", "amount": "1茶匙"},
    {"name": "花椒粉", "amount": "1茶匙"},
    {"name": "大蒜", "amount": "2瓣"},
    {"name": "生姜", "amount": "1小块"},
    {"name": "青蒜苗", "amount": "1根"},
    {"name": "生抽", "amount": "1汤匙"},
    {"name": "水淀粉", "amount": "3汤匙"},
    {"name": "食用油", "amount": "30毫升"}
  ],
  "steps": [
    "豆腐切成2厘米见方的块；豆豉剁碎，姜蒜切末，青蒜苗切段。",
    "锅中烧开水，加一小勺盐，轻轻放入豆腐，小火煮2分钟去掉豆腥味，捞出沥干。",
    "热锅倒油，下牛肉末中火炒散，炒到水分收干、颜色焦黄酥香。",
    "转小火，加入豆瓣酱、豆豉、姜蒜末和辣椒面，慢慢炒出红油。",
    "倒入约200毫升开水烧开，放入豆腐，加生抽，小火烧5分钟入味；期间用铲背轻推，不要翻铲，以免把豆腐弄碎。",
    "水淀粉分三次淋入，每次轻推到汤汁变稠再加下一次，最后汤汁浓稠发亮、裹住豆腐。",
    "撒上青蒜苗段，盛出后趁热撒花椒粉即可。"
  ],
  "pairing": ["白米饭", "清炒时蔬", "冬瓜汤"],
  "tips": [
    "豆腐用盐水焯过更有韧性，烧的时候不容易碎。",
    "勾芡分次进行，汤汁才能均匀地挂在豆腐上。",
    "花椒粉出锅后再撒，麻香味最足；怕辣可以减少辣椒面。"
  ],
  "nutrition": {"calories": 400, "protein": "十九克", "fat": "二十八克", "carbs": "十二克"}
}
```

趁热吃最香，记得多煮点米饭！"#,
    },
];

/// Fridge ideas the demo writes.
pub const FRIDGE: &[CannedAnswer] = &[
    // Wrapped in a fence, as models often do even when told not to.
    CannedAnswer {
        reasoning: "",
        content: r#"```json
{
  "ideas": [
    {"dish": "番茄炒蛋", "why": "番茄和鸡蛋正好都有，酸甜下饭，十几分钟就能上桌。", "uses": ["番茄", "鸡蛋"], "extra": ["小葱"], "minutes": 15},
    {"dish": "青椒土豆丝", "why": "土豆切丝快炒，配青椒清爽脆口，是最省事的下饭素菜。", "uses": ["土豆", "青椒"], "extra": [], "minutes": 20},
    {"dish": "青椒炒蛋", "why": "青椒的清香配嫩滑的鸡蛋，比番茄炒蛋更快手。", "uses": ["青椒", "鸡蛋"], "extra": [], "minutes": 10},
    {"dish": "番茄土豆汤", "why": "一锅汤把剩下的番茄和土豆都用上，酸香暖胃。", "uses": ["番茄", "土豆"], "extra": [], "minutes": 25}
  ]
}
```"#,
    },
    CannedAnswer {
        reasoning: "冰箱里有豆腐、白菜、五花肉和香菇，适合做炖菜、汤和小炒，做法错开，时间都控制在半小时内。",
        content: r#"{
  "ideas": [
    {"dish": "白菜炖豆腐", "why": "白菜和豆腐一锅炖，汤鲜味美，加几片五花肉更香。", "uses": ["白菜", "豆腐", "五花肉"], "extra": [], "minutes": 25},
    {"dish": "香菇炒肉片", "why": "五花肉煸出油再炒香菇，肉香菇鲜，很下饭。", "uses": ["香菇", "五花肉"], "extra": ["青椒"], "minutes": 20},
    {"dish": "醋溜白菜", "why": "白菜帮切片大火快炒，酸香爽脆，几分钟就好。", "uses": ["白菜"], "extra": ["干辣椒"], "minutes": 10},
    {"dish": "香菇豆腐汤", "why": "香菇提鲜、豆腐嫩滑，清淡暖胃，适合配重口味的菜。", "uses": ["香菇", "豆腐"], "extra": ["鸡蛋"], "minutes": 15},
    {"dish": "家常豆腐", "why": "豆腐煎到两面金黄，再和肉片、香菇一起烧，咸香入味。", "uses": ["豆腐", "五花肉", "香菇"], "extra": [], "minutes": 25}
  ]
}"#,
    },
];
